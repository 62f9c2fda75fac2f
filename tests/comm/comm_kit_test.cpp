// The conformance kit on comm plugins (sdk/conformance/src/comm_kit.hpp):
// the SDK's tcp example passes on 1, 2 and 4 processes the kit starts; its
// planted failures — a reduction that leaves a rank out, a timeout ignored —
// fail with the case and the reason; the mpi plugin, which joins its ranks
// itself, passes under mpiexec.
#include <gtest/gtest.h>

#include <string>

#include "shell.hpp"

namespace tandem::test {
namespace {

CliRun kit(const std::string& plugin, const std::string& args) {
  return shell("'" TANDEM_CONFORMANCE "' --plugin '" + plugin + "' " + args);
}

const std::string kTcp = std::string(TANDEM_COMM_PLUGIN_DIR) + "/libtandem-tcp.so";

TEST(CommKit, TheTcpExamplePassesOnOneTwoAndFourProcesses) {
  CliRun run = kit(kTcp, "--ranks 1,2,4 --timeout 1");
  EXPECT_EQ(run.code, 0) << run.output;
  for (const char* size : {"1 ranks: ", "2 ranks: ", "4 ranks: "}) {
    const size_t at = run.output.find(size);
    ASSERT_NE(at, std::string::npos) << run.output;
    EXPECT_NE(run.output.find(" passed, 0 failed", at), std::string::npos) << run.output;
  }
  EXPECT_NE(run.output.find("every case passed"), std::string::npos) << run.output;
  // Declined dtypes are listed with -v, required ones are not among them.
  CliRun verbose = kit(kTcp, "--ranks 2 --timeout 1 -v");
  EXPECT_NE(verbose.output.find("PASS 2 ranks: allreduce avg f32 count 4099"), std::string::npos)
      << verbose.output;
  EXPECT_NE(verbose.output.find("PASS 2 ranks: timeout (rank 1 never joins an allreduce)"), std::string::npos)
      << verbose.output;
  EXPECT_NE(verbose.output.find("UNSUPPORTED 2 ranks: allreduce sum bf16"), std::string::npos)
      << verbose.output;
  EXPECT_NE(verbose.output.find("UNSUPPORTED 2 ranks: send_start, recv_start, request_test"),
            std::string::npos)
      << verbose.output;
}

TEST(CommKit, AReductionThatLeavesARankOutFailsNamingTheCase) {
  CliRun run = kit(std::string(TANDEM_COMM_PLUGIN_DIR) + "/wrong_sum/libtandem-tcp_wrong_sum.so",
                   "--ranks 1,2 --timeout 1");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("1 ranks: "), std::string::npos);
  EXPECT_NE(
      run.output.find(
          "FAIL 2 ranks: allreduce sum f32 count 1: rank 0: result element 0 is 1.000000, expected 3.000000"),
      std::string::npos)
      << run.output;
}

TEST(CommKit, ATimeoutIgnoredFailsInsteadOfHanging) {
  CliRun run = kit(std::string(TANDEM_COMM_PLUGIN_DIR) + "/ignore_timeout/libtandem-tcp_ignore_timeout.so",
                   "--ranks 2 --timeout 1");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find(
                "FAIL 2 ranks: timeout (rank 1 never joins an allreduce): rank 0: no return 7 s after it "
                "began, with a timeout of 1.0 s: the plugin does not honour "
                "tdm_comm_init_info.timeout_seconds"),
            std::string::npos)
      << run.output;
}

TEST(CommKit, TheMpiPluginPassesUnderMpiexec) {
  if (std::string(TANDEM_MPIEXEC).empty()) GTEST_SKIP() << "mpiexec not found (install openmpi-bin)";
  if (!TANDEM_HAVE_MPI_PLUGIN)
    GTEST_SKIP() << "the mpi plugin is not part of this build (libopenmpi-dev missing)";
  CliRun run = kit(std::string(TANDEM_BUILD_PLUGIN_DIR) + "/libtandem-mpi.so", "--ranks 1,2 --timeout 2 -v");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("joins its ranks itself"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("2 ranks: "), std::string::npos) << run.output;
  // Both ways of point to point: the blocking calls (ABI 1.15) and the started ones (1.16).
  EXPECT_NE(run.output.find("PASS 2 ranks: send and recv (a ring"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("PASS 2 ranks: send_start, recv_start, request_test (a ring"), std::string::npos)
      << run.output;
}

TEST(CommKit, ABackendStillGetsTheBackendKit) {
  CliRun run = kit(std::string(TANDEM_BUILD_PLUGIN_DIR) + "/libtandem-reference.so", "--op relu");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("reference: "), std::string::npos) << run.output;
}

}  // namespace
}  // namespace tandem::test
