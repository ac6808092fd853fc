# CUDA attention kernels (GroupQueryAttention, Attention 23/24).
# include() this file, add ${ONYX_CUDA_ATTENTION_SOURCES} to the onyx_cuda target (a
# target with the CUDA language enabled), put ${ONYX_CUDA_ATTENTION_DIR} and abi/ on its
# include path, and link CUDA::cudart. The sources include onyx_abi.h and the CUDA
# runtime headers only; provider.c includes cuda_attention_kernels.h for the tables.
# Build for sm_90 (or sm_90a) or newer: the kernels use mma.sync, ldmatrix, cp.async and
# mbarriers.
# Then call onyx_cuda_attention_add_hopper(<target>) after the target's compile options
# are set: it builds the Hopper route (wgmma, setmaxnreg) for sm_90a alone, whatever the
# target's architectures, and adds its objects to the target.
# The list carries providers/common's sources (and the folder list its directory) so a
# test can build the kernels alone; a target that has them already keeps one copy.
include(${CMAKE_CURRENT_LIST_DIR}/../../common/sources.cmake)
set(ONYX_CUDA_ATTENTION_DIR ${CMAKE_CURRENT_LIST_DIR} ${ONYX_PC_DIR})
set(ONYX_CUDA_ATTENTION_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_util.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_plan.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_route.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_gqa.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_onnx.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_flash.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_decode.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_ref.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_kv.cu
    ${ONYX_PC_SOURCES})
set(ONYX_CUDA_ATTENTION_HOPPER_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_attn_hopper.cu)

# An object library per target, compiled for sm_90a machine code only (no sm_90 cubin
# beside it, so the driver never picks a build without the Hopper instructions), with
# the target's own compile options, include folders and visibility.
function(onyx_cuda_attention_add_hopper target)
  set(obj ${target}_attn_hopper)
  add_library(${obj} OBJECT ${ONYX_CUDA_ATTENTION_HOPPER_SOURCES})
  set_target_properties(${obj} PROPERTIES
                        CUDA_ARCHITECTURES 90a-real
                        CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                        POSITION_INDEPENDENT_CODE ON
                        CUDA_VISIBILITY_PRESET hidden)
  get_target_property(opts ${target} COMPILE_OPTIONS)
  if(opts)
    target_compile_options(${obj} PRIVATE ${opts})
  endif()
  target_include_directories(${obj} PRIVATE ${ONYX_CUDA_ATTENTION_DIR})
  target_link_libraries(${obj} PRIVATE onyx_abi CUDA::cudart)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
endfunction()
