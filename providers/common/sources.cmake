# Provider-side helpers shared as SOURCE by the CPU and CUDA providers (see README.md).
# include() this file, add ${ONYX_PC_SOURCES} to a provider target (or to a test's
# library of kernels) and put ${ONYX_PC_DIR} on its include path. The sources include
# onyx_abi.h (abi/) and the C library only; build them with hidden visibility.
set(ONYX_PC_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ONYX_PC_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/pc_msg.c
    ${CMAKE_CURRENT_LIST_DIR}/pc_attr.c
    ${CMAKE_CURRENT_LIST_DIR}/pc_factory.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_params.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_gqa_inputs.c
    ${CMAKE_CURRENT_LIST_DIR}/attn_onnx_inputs.c
    ${CMAKE_CURRENT_LIST_DIR}/nbits_params.c)
