# The ONNX model loader: onnx.proto compiled with protoc-c, and the sources that turn a
# ModelProto into an onyx__graph. Included from core/CMakeLists.txt; expects PROTOC_C,
# PkgConfig::PROTOBUF_C and the onyx_abi target from the top level.

set(ONYX_LOADER_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/onnx_proto)
set(ONYX_LOADER_PROTO ${CMAKE_CURRENT_LIST_DIR}/onnx.proto)

add_custom_command(
  OUTPUT ${ONYX_LOADER_GEN_DIR}/onnx.pb-c.c ${ONYX_LOADER_GEN_DIR}/onnx.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${ONYX_LOADER_GEN_DIR}
  COMMAND ${PROTOC_C} --c_out=${ONYX_LOADER_GEN_DIR} --proto_path=${CMAKE_CURRENT_LIST_DIR}
          ${ONYX_LOADER_PROTO}
  DEPENDS ${ONYX_LOADER_PROTO}
  COMMENT "Generating the ONNX protobuf-c code from onnx.proto"
  VERBATIM)

# Generated code is not ours to fix; keep its warnings out of -Werror builds.
set_source_files_properties(${ONYX_LOADER_GEN_DIR}/onnx.pb-c.c PROPERTIES COMPILE_OPTIONS -w)

# Untrusted files (models, external data, configs): opened without blocking, checked on
# the descriptor, read whole. A static library the core, the loader and genai/ share.
add_library(onyx_untrusted_file STATIC ${CMAKE_CURRENT_LIST_DIR}/untrusted_file.c)
target_include_directories(onyx_untrusted_file PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(onyx_untrusted_file PUBLIC onyx_abi)

add_library(onyx_loader STATIC
  ${CMAKE_CURRENT_LIST_DIR}/model_functions.c
  ${CMAKE_CURRENT_LIST_DIR}/model_load.c
  ${CMAKE_CURRENT_LIST_DIR}/model_load_attr.c
  ${CMAKE_CURRENT_LIST_DIR}/model_load_io.c
  ${CMAKE_CURRENT_LIST_DIR}/tensor_proto.c
  ${ONYX_LOADER_GEN_DIR}/onnx.pb-c.c
  ${ONYX_LOADER_GEN_DIR}/onnx.pb-c.h)
set_target_properties(onyx_loader PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(onyx_loader PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# SYSTEM: the generated header is included by loader sources and tests under our flags.
target_include_directories(onyx_loader SYSTEM PUBLIC ${ONYX_LOADER_GEN_DIR})
target_link_libraries(onyx_loader PUBLIC onyx_abi onyx_untrusted_file PkgConfig::PROTOBUF_C)
