# `cmake --install`: the SDK a third party builds providers and applications against.
#
#   include/onyx/         the ABI headers (abi/) and the public API (onyx.h)
#   lib/                  libonyx.so.MAJOR (and genai, tokenizer) with SONAME and version
#   lib/onyx/             the providers (libonyx_cpu.so, libonyx_cuda.so)
#   bin/                  the tools, which find ../etc/onyx/plugins.ini (config_lookup.c)
#   etc/onyx/plugins.ini  the installed providers, by paths relative to the file, so the
#                         prefix can move; etc/onyx/providers.d/ for drop-in fragments
#   lib/cmake/Onyx/       find_package(Onyx): Onyx::abi (headers only, for providers)
#                         and Onyx::onyx (the library, for applications)
#   lib/pkgconfig/        onyx.pc and onyx-abi.pc
#
# Everything here is set on targets the subdirectories made, so their own files keep
# only what the build needs.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ONYX_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/onyx)
set(ONYX_INSTALL_PROVIDERDIR ${CMAKE_INSTALL_LIBDIR}/onyx)
set(ONYX_INSTALL_CONFDIR ${CMAKE_INSTALL_SYSCONFDIR}/onyx)
set(ONYX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Onyx)
# The highest ABI version the headers describe (ONYX_ABI_LATEST since the v3 factory,
# ONYX_ABI_VERSION before it), for the package files.
file(STRINGS ${PROJECT_SOURCE_DIR}/abi/onyx_provider.h _onyx_abi_line
     REGEX "^#define ONYX_ABI_VERSION [0-9]+u?$")
if(EXISTS ${PROJECT_SOURCE_DIR}/abi/onyx_factory.h)
  file(STRINGS ${PROJECT_SOURCE_DIR}/abi/onyx_factory.h _onyx_abi_line
       REGEX "^#define ONYX_ABI_LATEST [0-9]+u?$")
endif()
string(REGEX REPLACE "^#define ONYX_ABI_[A-Z]+ ([0-9]+)u?$" "\\1" ONYX_ABI_VERSION_NUMBER
       "${_onyx_abi_line}")
file(RELATIVE_PATH ONYX_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" ONYX_PC_TO_PREFIX "${ONYX_PC_TO_PREFIX}")

# Libraries: a SONAME that moves with the major version (0.x: every minor may break).
foreach(lib onyx onyx_genai onyx_tokenizer)
  if(TARGET ${lib})
    set_target_properties(${lib} PROPERTIES VERSION ${PROJECT_VERSION}
                                            SOVERSION ${PROJECT_VERSION_MAJOR})
  endif()
endforeach()
set_target_properties(onyx_abi PROPERTIES EXPORT_NAME abi)
set_target_properties(onyx PROPERTIES EXPORT_NAME onyx)

install(TARGETS onyx_abi EXPORT OnyxTargets INCLUDES DESTINATION ${ONYX_INSTALL_INCLUDEDIR})
install(TARGETS onyx EXPORT OnyxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${ONYX_INSTALL_INCLUDEDIR})
foreach(lib onyx_genai onyx_tokenizer)
  if(TARGET ${lib})
    install(TARGETS ${lib} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
file(GLOB ONYX_ABI_HEADERS ${PROJECT_SOURCE_DIR}/abi/*.h)
install(FILES ${ONYX_ABI_HEADERS} ${PROJECT_SOURCE_DIR}/core/onyx.h
        DESTINATION ${ONYX_INSTALL_INCLUDEDIR})

# Providers: loaded with dlopen by path, so no SONAME and no link from anything.
set(ONYX_INSTALLED_PROVIDERS onyx_cpu)
if(TARGET onyx_cuda)
  list(APPEND ONYX_INSTALLED_PROVIDERS onyx_cuda)
endif()
install(TARGETS ${ONYX_INSTALLED_PROVIDERS} LIBRARY DESTINATION ${ONYX_INSTALL_PROVIDERDIR})

# Tools find libonyx in ../lib wherever the prefix is.
set(ONYX_INSTALLED_TOOLS)
foreach(tool onyx-run onyx-list onyx-generate onyx-check-provider)
  if(TARGET ${tool})
    list(APPEND ONYX_INSTALLED_TOOLS ${tool})
  endif()
endforeach()
file(RELATIVE_PATH _onyx_bin_to_lib /p/${CMAKE_INSTALL_BINDIR} /p/${CMAKE_INSTALL_LIBDIR})
set_target_properties(${ONYX_INSTALLED_TOOLS} PROPERTIES INSTALL_RPATH "$ORIGIN/${_onyx_bin_to_lib}")
install(TARGETS ${ONYX_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# plugins.ini of the prefix: the same selection as the source tree's, with the paths
# of the installed providers relative to etc/onyx.
file(RELATIVE_PATH ONYX_INI_TO_PROVIDERS /p/${ONYX_INSTALL_CONFDIR} /p/${ONYX_INSTALL_PROVIDERDIR})
set(ONYX_INSTALL_INI_CUDA "")
if(TARGET onyx_cuda)
  set(ONYX_INSTALL_INI_CUDA
      "[provider.cuda]\npath = ${ONYX_INI_TO_PROVIDERS}/libonyx_cuda.so\nenabled = false\noption.device = 0\n\n")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/plugins.ini.in ${PROJECT_BINARY_DIR}/install/plugins.ini @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/plugins.ini DESTINATION ${ONYX_INSTALL_CONFDIR})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/providers.d.README
        DESTINATION ${ONYX_INSTALL_CONFDIR}/providers.d RENAME README)

# find_package(Onyx)
install(EXPORT OnyxTargets NAMESPACE Onyx:: DESTINATION ${ONYX_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/OnyxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/OnyxConfig.cmake
  INSTALL_DESTINATION ${ONYX_INSTALL_CMAKEDIR}
  PATH_VARS ONYX_INSTALL_INCLUDEDIR ONYX_INSTALL_PROVIDERDIR ONYX_INSTALL_CONFDIR)
# 0.x: a minor version may change the ABI, so only the same minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/OnyxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/OnyxConfig.cmake
              ${PROJECT_BINARY_DIR}/install/OnyxConfigVersion.cmake
        DESTINATION ${ONYX_INSTALL_CMAKEDIR})

# pkg-config: onyx (applications) and onyx-abi (providers: headers only).
foreach(pc onyx onyx-abi)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/install/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/install/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
