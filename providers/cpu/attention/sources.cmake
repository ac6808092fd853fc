# CPU attention kernels (GroupQueryAttention, Attention, RotaryEmbedding x2).
# include() this file and add ${ONYX_CPU_ATTENTION_SOURCES} to the onyx_cpu target,
# with ${ONYX_CPU_ATTENTION_DIR} (this folder and providers/common) on its include path
# and -lm. The sources include onyx_abi.h (abi/), cpu_impl.h (providers/cpu/) and
# providers/common's headers only; the list carries providers/common's sources so a
# test can build the kernels alone (a target that has them already keeps one copy).
include(${CMAKE_CURRENT_LIST_DIR}/../../common/sources.cmake)
set(ONYX_CPU_ATTENTION_DIR ${CMAKE_CURRENT_LIST_DIR} ${ONYX_PC_DIR})
set(ONYX_CPU_ATTENTION_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/attn_util.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_core.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_rope.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_gqa.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_onnx.c
    ${ONYX_PC_SOURCES})
# The engine's vector kernels gain from fused multiply-adds and -O3 (as cpu_gemm.c):
# about 20% on prefill. This applies in the directory that includes this file.
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/attn_core.c PROPERTIES
    COMPILE_OPTIONS "-ffp-contract=fast;$<$<NOT:$<CONFIG:Debug>>:-O3>")
endif()
