# CUDA attention kernels (GroupQueryAttention, Attention 23/24).
# include() this file, add ${ONYX_CUDA_ATTENTION_SOURCES} to the onyx_cuda target (a
# target with the CUDA language enabled), put ${ONYX_CUDA_ATTENTION_DIR} and abi/ on its
# include path, and link CUDA::cudart. The sources include onyx_abi.h and the CUDA
# runtime headers only; provider.c includes cuda_attention_kernels.h for the tables.
# Build for sm_90 (or sm_90a) or newer: the kernels use mma.sync, ldmatrix and cp.async.
# The list carries providers/common's sources (and the folder list its directory) so a
# test can build the kernels alone; a target that has them already keeps one copy.
include(${CMAKE_CURRENT_LIST_DIR}/../../common/sources.cmake)
set(ONYX_CUDA_ATTENTION_DIR ${CMAKE_CURRENT_LIST_DIR} ${ONYX_PC_DIR})
set(ONYX_CUDA_ATTENTION_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_util.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_plan.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_gqa.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_onnx.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_flash.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_ref.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_kv.cu
    ${ONYX_PC_SOURCES})
