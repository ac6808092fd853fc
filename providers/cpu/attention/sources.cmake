# CPU attention kernels (GroupQueryAttention, Attention, RotaryEmbedding x2).
# include() this file and add ${ONYX_CPU_ATTENTION_SOURCES} to the onyx_cpu target,
# with this folder on its include path (attention_kernels.h) and -lm. The sources
# include onyx_abi.h (abi/) and cpu_impl.h (providers/cpu/) only.
set(ONYX_CPU_ATTENTION_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ONYX_CPU_ATTENTION_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/attn_util.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_core.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_rope.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_gqa.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_onnx.c)
