# The fuzzers inside Tandem's build (included by CMakeLists.txt here).
#
# The tree is built with g++, which has no libFuzzer, so this folder is
# configured again as a project of its own with clang++ (ExternalProject)
# and built with the rest. Each test fuzz.<target> runs one fuzzer for
# TANDEM_FUZZ_SECONDS over a copy of its committed corpus and fails on any
# crash, leak, UB, timeout or excess memory; without clang++ and libFuzzer
# it reports SKIPPED with the reason, never passed.
option(TANDEM_BUILD_FUZZERS "Build the libFuzzer targets of tests/fuzz with clang++ when it has libFuzzer" ON)
set(TANDEM_FUZZ_SECONDS 20 CACHE STRING "How long each fuzz.<target> test fuzzes")
set(TANDEM_FUZZ_BUILD_JOBS "2" CACHE STRING "Parallel jobs of the fuzzers' build (empty: the generator's default; 2 as the rest of the build)")
find_program(TANDEM_FUZZ_CXX NAMES clang++ DOC "clang++ with libFuzzer, for tests/fuzz")

# Does it link a fuzzer with the sanitizers? (Debian: libFuzzer and the
# sanitizer runtimes are in libclang-rt-dev, which clang only recommends.)
# Checked once per compiler.
set(reason "")
if(NOT TANDEM_BUILD_FUZZERS)
  set(reason "TANDEM_BUILD_FUZZERS is OFF")
elseif(NOT TANDEM_FUZZ_CXX)
  set(reason "clang++ not found (install clang and libclang-rt-dev: scripts/install-deps.sh)")
else()
  if(NOT TANDEM_FUZZ_CXX_CHECKED STREQUAL TANDEM_FUZZ_CXX)
    set(probe "${CMAKE_CURRENT_BINARY_DIR}/libfuzzer_probe")
    file(WRITE "${probe}.cpp"
      "#include <cstddef>\n#include <cstdint>\n"
      "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
    execute_process(
      COMMAND "${TANDEM_FUZZ_CXX}" -fsanitize=fuzzer,address,undefined "${probe}.cpp" -o "${probe}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    string(STRIP "${out}" out)
    if(rc EQUAL 0)
      set(TANDEM_FUZZ_CXX_ERROR "" CACHE INTERNAL "")
    elseif(out STREQUAL "")
      set(TANDEM_FUZZ_CXX_ERROR "exit status ${rc}" CACHE INTERNAL "")
    else()
      set(TANDEM_FUZZ_CXX_ERROR "${out}" CACHE INTERNAL "")
    endif()
    set(TANDEM_FUZZ_CXX_CHECKED "${TANDEM_FUZZ_CXX}" CACHE INTERNAL "")
  endif()
  if(NOT TANDEM_FUZZ_CXX_ERROR STREQUAL "")
    string(REGEX REPLACE "\n.*" "" first_line "${TANDEM_FUZZ_CXX_ERROR}")
    set(reason "${TANDEM_FUZZ_CXX} cannot link -fsanitize=fuzzer,address,undefined (${first_line}); \
install libclang-rt-dev (scripts/install-deps.sh)")
  endif()
endif()

set(fuzz_build "${CMAKE_CURRENT_BINARY_DIR}/build")
if(reason STREQUAL "")
  include(ExternalProject)
  set(byproducts "")
  foreach(t IN LISTS TANDEM_FUZZ_TARGETS)
    list(APPEND byproducts "${fuzz_build}/${t}_fuzzer")
  endforeach()
  set(jobs "")
  if(NOT TANDEM_FUZZ_BUILD_JOBS STREQUAL "")
    set(jobs --parallel ${TANDEM_FUZZ_BUILD_JOBS})
  endif()
  # BUILD_ALWAYS: ExternalProject does not see edits to the host sources;
  # the inner build does, and is a no-op when nothing changed.
  ExternalProject_Add(tandem_fuzzers
    SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}"
    BINARY_DIR "${fuzz_build}"
    CMAKE_ARGS "-DCMAKE_CXX_COMPILER=${TANDEM_FUZZ_CXX}"
    BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> ${jobs}
    BUILD_ALWAYS ON
    BUILD_BYPRODUCTS ${byproducts}
    INSTALL_COMMAND "")
else()
  message(STATUS "Fuzz tests will be skipped: ${reason}")
endif()

foreach(t IN LISTS TANDEM_FUZZ_TARGETS)
  add_test(NAME fuzz.${t}
           COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/run_fuzzer.sh" "${fuzz_build}/${t}_fuzzer"
                   "${CMAKE_CURRENT_SOURCE_DIR}/corpus/${t}" "${CMAKE_CURRENT_BINARY_DIR}/scratch/${t}"
                   "${TANDEM_FUZZ_SECONDS}" "${reason}")
  math(EXPR timeout "${TANDEM_FUZZ_SECONDS} + 120")
  set_tests_properties(fuzz.${t} PROPERTIES SKIP_RETURN_CODE 77 LABELS fuzz TIMEOUT ${timeout})
endforeach()
