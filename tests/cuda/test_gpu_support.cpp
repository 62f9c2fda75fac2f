// Which GPUs the cuda plugin accepts at device open, decided from the
// compute capability before any kernel runs, and the PCI address NVML
// knows a GPU by (host code, no GPU needed).
#include <gtest/gtest.h>

#include "gpu_support.hpp"

using tandem::cuda::unsupported_gpu_reason;

namespace {

const char* kBuilt = "75-real,80-real,86-real,89-real,90-real,100-real,120-real,120-virtual";

TEST(GpuSupport, AcceptsEveryGenerationFromTuringOn) {
  for (auto [major, minor] : {std::pair{7, 5}, {8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}})
    EXPECT_EQ(unsupported_gpu_reason(0, "gpu", major, minor, 75, kBuilt), "") << major << "." << minor;
}

TEST(GpuSupport, AcceptsNewerThanEveryBuiltArchitectureThroughPtx) {
  EXPECT_EQ(unsupported_gpu_reason(0, "future", 13, 0, 75, kBuilt), "");
}

TEST(GpuSupport, RefusesOlderGpuNamingItAndWhatToDo) {
  const std::string why = unsupported_gpu_reason(1, "Tesla V100-SXM2-16GB", 7, 0, 75, kBuilt);
  ASSERT_FALSE(why.empty());
  for (const char* part :
       {"GPU 1", "Tesla V100-SXM2-16GB", "compute capability 7.0", "7.5", kBuilt, "--device"})
    EXPECT_NE(why.find(part), std::string::npos) << "missing '" << part << "' in: " << why;
  EXPECT_FALSE(unsupported_gpu_reason(0, "P100", 6, 0, 75, kBuilt).empty());
}

TEST(GpuSupport, TheOldestBuiltArchitectureDecides) {
  EXPECT_FALSE(unsupported_gpu_reason(0, "T4", 7, 5, 80, "80-real,90").empty());
  EXPECT_EQ(unsupported_gpu_reason(0, "A100", 8, 0, 80, "80-real,90"), "");
}

TEST(GpuSupport, UnknownOldestArchitectureRefusesNothing) {
  EXPECT_EQ(unsupported_gpu_reason(0, "old", 5, 0, 0, "native"), "");
}

TEST(GpuSupport, PciBusIdIsWrittenAsNvmlReadsIt) {
  EXPECT_EQ(tandem::cuda::pci_bus_id(0, 0x17, 0), "00000000:17:00.0");
  EXPECT_EQ(tandem::cuda::pci_bus_id(1, 0xb3, 0x1f), "00000001:b3:1f.0");
}

}  // namespace
