# Installs the TandemSDK CMake package (component `dev`): the config and
# version files, the exported targets (install(EXPORT) in sdk/CMakeLists.txt),
# and the plugin helper with its linker version script. Included from
# sdk/CMakeLists.txt.
include(CMakePackageConfigHelpers)

# The package version is the SDK's, read from the header that defines it.
file(STRINGS "${PROJECT_SOURCE_DIR}/sdk/include/tandem/version.h" _tandem_version_lines
     REGEX "^#define TDM_(ABI_MAJOR|ABI_MINOR|SDK_VERSION) ")
foreach(_line IN LISTS _tandem_version_lines)
  if(_line MATCHES "^#define TDM_ABI_MAJOR ([0-9]+)")
    set(TANDEM_ABI_MAJOR "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^#define TDM_ABI_MINOR ([0-9]+)")
    set(TANDEM_ABI_MINOR "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^#define TDM_SDK_VERSION \"([0-9.]+)\"")
    set(TANDEM_SDK_VERSION "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT TANDEM_SDK_VERSION OR NOT DEFINED TANDEM_ABI_MAJOR OR NOT DEFINED TANDEM_ABI_MINOR)
  message(FATAL_ERROR "could not read TDM_SDK_VERSION / TDM_ABI_* from sdk/include/tandem/version.h")
endif()
unset(_tandem_version_lines)
unset(_line)

set(TANDEM_SDK_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/TandemSDK")

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/TandemSDKConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/sdk/TandemSDKConfig.cmake"
  INSTALL_DESTINATION "${TANDEM_SDK_CMAKE_INSTALL_DIR}"
  PATH_VARS TANDEM_PLUGIN_INSTALL_DIR)
# SameMajorVersion: the ABI major is the compatibility line (sdk/ABI.md rules 1-2).
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/sdk/TandemSDKConfigVersion.cmake"
  VERSION "${TANDEM_SDK_VERSION}"
  COMPATIBILITY SameMajorVersion)

install(FILES
    "${PROJECT_BINARY_DIR}/sdk/TandemSDKConfig.cmake"
    "${PROJECT_BINARY_DIR}/sdk/TandemSDKConfigVersion.cmake"
    "${PROJECT_SOURCE_DIR}/cmake/TandemPlugin.cmake"
    "${PROJECT_SOURCE_DIR}/cmake/plugin.map"
  DESTINATION "${TANDEM_SDK_CMAKE_INSTALL_DIR}"
  COMPONENT dev)
# TandemConformance.cmake is installed next to these by sdk/conformance.
