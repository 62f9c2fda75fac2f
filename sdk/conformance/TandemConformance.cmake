# tandem_add_conformance_test(<plugin-target> [NAME <test-name>] [REFERENCE <path>]
#                             [REQUIRE_OPS <op>...] [ARGS <driver args>...])
#
# Adds a ctest that runs the conformance kit's driver against the plugin
# built by <plugin-target>, comparing every op of the catalog with the
# `reference` backend. Ops listed in REQUIRE_OPS must be supported (an
# UNSUPPORTED answer for them fails the test). A plugin whose device is absent
# on the machine (a GPU backend on a CPU-only runner) makes the driver exit
# 77, which ctest reports as skipped.
#
#   tandem_add_conformance_test(tandem-plugin-cuda REQUIRE_OPS matmul linear conv2d)
#
# Works in the Tandem tree (driver target `tandem-conformance`) and out of
# tree after find_package(TandemSDK) (imported Tandem::conformance-driver).
function(tandem_add_conformance_test plugin_target)
  cmake_parse_arguments(ARG "" "NAME;REFERENCE" "REQUIRE_OPS;ARGS" ${ARGN})
  if(TARGET tandem-conformance)
    set(driver tandem-conformance)
  elseif(TARGET Tandem::conformance-driver)
    set(driver Tandem::conformance-driver)
  else()
    message(FATAL_ERROR "tandem_add_conformance_test: no conformance driver "
                        "(build the Tandem SDK or find_package(TandemSDK))")
  endif()
  if(NOT ARG_NAME)
    string(REGEX REPLACE "^tandem-plugin-" "" short "${plugin_target}")
    set(ARG_NAME "conformance.${short}")
  endif()
  set(args --plugin "$<TARGET_FILE:${plugin_target}>")
  if(ARG_REFERENCE)
    list(APPEND args --reference "${ARG_REFERENCE}")
  elseif(TARGET tandem-plugin-reference)
    list(APPEND args --reference "$<TARGET_FILE:tandem-plugin-reference>")
  endif()
  foreach(op IN LISTS ARG_REQUIRE_OPS)
    list(APPEND args --require-op "${op}")
  endforeach()
  add_test(NAME ${ARG_NAME} COMMAND ${driver} ${args} ${ARG_ARGS})
  set_tests_properties(${ARG_NAME} PROPERTIES SKIP_RETURN_CODE 77 LABELS conformance)
endfunction()
