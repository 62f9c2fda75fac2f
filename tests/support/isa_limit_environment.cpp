// Linked into the test programs that ctest also runs with oneDNN limited to
// a narrower instruction set: tandem_discover_tests_under_isa_limit in
// tests/CMakeLists.txt sets TANDEM_TEST_ISA_LIMIT=<limit> for those runs,
// and this file, before main and so before any plugin loads oneDNN, turns
// it into ONEDNN_MAX_CPU_ISA=<limit> for the process and the programs it
// starts. The limited run always runs: where the limit changes nothing (the
// CPU has no more than it allows) it says so, and still proves that the
// tests pass with the limit set, as they must on any CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace {

// Whether the CPU has an instruction set oneDNN may use that the limit
// `isa` takes away (AVX2 removes AVX-512 and AVX-VNNI; AVX512_CORE removes
// AVX512-VNNI, AVX512-BF16 and AMX).
bool limit_takes_something_away(const std::string& isa) {
  __builtin_cpu_init();
  if (isa == "AVX2") return __builtin_cpu_supports("avx512f") || __builtin_cpu_supports("avxvnni");
  if (isa == "AVX512_CORE")
    return __builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avx512bf16");
  return true;  // an unknown limit: run rather than guess
}

const char* requested_limit() {
  const char* limit = std::getenv("TANDEM_TEST_ISA_LIMIT");
  return limit != nullptr && *limit != '\0' ? limit : nullptr;
}

class IsaLimitEnvironment : public ::testing::Environment {
 public:
  IsaLimitEnvironment() {
    if (const char* limit = requested_limit()) setenv("ONEDNN_MAX_CPU_ISA", limit, 1);
  }
  void SetUp() override {
    const char* limit = requested_limit();
    if (limit == nullptr || limit_takes_something_away(limit)) return;
    std::cout << "note: ONEDNN_MAX_CPU_ISA=" << limit
              << " takes nothing away on this CPU (it has no instruction set above the limit)" << std::endl;
  }
};

const auto* const registered = ::testing::AddGlobalTestEnvironment(new IsaLimitEnvironment);

}  // namespace
