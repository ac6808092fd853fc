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
# The engine's vector kernels gain from fused multiply-adds and -O3 (as cpu_gemm.c):
# about 20% on prefill. This applies in the directory that includes this file.
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/attn_core.c PROPERTIES
    COMPILE_OPTIONS "-ffp-contract=fast;$<$<NOT:$<CONFIG:Debug>>:-O3>")
endif()
