// A comm plugin chosen by name (--comm, [train] comm): the SDK's tcp
// example, started by the RANK/WORLD_SIZE launcher contract with its
// rendezvous id in a file, trains the Fashion-MNIST MLP on 2 processes to
// the weights the mpi plugin gives under mpiexec; a wrong choice is named;
// --plugin-option reaches its init; and a rank whose plugin ignores its
// timeout is stopped by the host's watchdog instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "parallel_runs.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

const std::string kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

// `tandem train` as rank `rank` of `world` of a launcher that sets RANK and
// WORLD_SIZE (ABI.md's launcher contract), in the background of a shell line.
std::string rank_command(int rank, int world, const std::string& args) {
  return "env -u TANDEM_PLUGIN_PATH RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
         " LOCAL_RANK=" + std::to_string(rank) + " '" TANDEM_EXE "' train " + args + " --plugin-path '" +
         TANDEM_COMM_PLUGIN_DIR + "'";
}

// Both ranks of a 2-process run, rank 1's output after rank 0's.
CliRun two_ranks(const std::string& args) {
  return shell("(" + rank_command(1, 2, args) + " > /dev/null 2>&1 &) ; " + rank_command(0, 2, args));
}

class CommChoice : public ::testing::Test {
 protected:
  std::string model() const { return "'" TANDEM_SOURCE_DIR "/examples/fmnist_mlp.toml'"; }
  TempDir dir_;
};

TEST_F(CommChoice, TcpChosenByNameTrainsTheFashionMnistMlpAsMpiDoes) {
  if (!std::filesystem::exists(kFashion))
    GTEST_SKIP() << kFashion << " is absent (apt-get install dataset-fashion-mnist)";
  const std::string common = model() +
                             " --device reference:0 --set train.steps=30 --set train.batch_size=64"
                             " --set train.log_every=10";
  CliRun tcp = two_ranks(common + " --comm tcp --rendezvous file://" + dir_.file("id") + " --run-dir " +
                         dir_.file("tcp"));
  ASSERT_EQ(tcp.code, 0) << tcp.output;
  EXPECT_NE(tcp.output.find("per rank x 2 ranks (env)"), std::string::npos) << tcp.output;
  auto saved = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(dir_.file("tcp")));
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->metadata.at("tandem.comm"), "tcp=0.1.0")
      << "the checkpoint names the comm plugin it ran on";
  if (std::string(TANDEM_MPIEXEC).empty() || !TANDEM_HAVE_MPI_PLUGIN)
    GTEST_SKIP() << "trained on tcp; the mpi comparison needs mpiexec and the mpi plugin";
  CliRun mpi = shell("env -u TANDEM_PLUGIN_PATH '" TANDEM_MPIEXEC
                     "' -np 2 --oversubscribe --allow-run-as-root '" TANDEM_EXE "' train " +
                     common + " --run-dir " + dir_.file("mpi"));
  ASSERT_EQ(mpi.code, 0) << mpi.output;
  const double worst = largest_difference(dir_.file("tcp"), dir_.file("mpi"));
  std::cout << "largest weight difference, tcp vs mpi, 2 ranks, 30 steps: " << worst << "\n";
  EXPECT_LE(worst, 1e-6);
}

TEST_F(CommChoice, AnUnknownOrWrongKindOfPluginIsNamed) {
  const std::string args = "'" TANDEM_SOURCE_DIR
                           "/tests/packaging/tiny_synthetic.toml' --device reference:0 --run-dir " +
                           dir_.file("r");
  CliRun unknown = shell(rank_command(0, 2, args + " --comm nope"));
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.output.find("no comm plugin named 'nope' was loaded (--comm / [train] comm)"),
            std::string::npos)
      << unknown.output;
  CliRun backend = shell(rank_command(0, 2, args + " --comm reference"));
  EXPECT_NE(backend.code, 0);
  EXPECT_NE(backend.output.find("is not a comm plugin"), std::string::npos) << backend.output;
}

TEST_F(CommChoice, PluginOptionsReachTheCommPluginsInit) {
  const std::string args = "'" TANDEM_SOURCE_DIR
                           "/tests/packaging/tiny_synthetic.toml' --device reference:0 --run-dir " +
                           dir_.file("r") + " --comm tcp --rendezvous file://" + dir_.file("id");
  CliRun colour = shell(rank_command(0, 2, args + " --plugin-option tcp.colour=red"));
  EXPECT_NE(colour.code, 0);
  EXPECT_NE(colour.output.find("unknown option 'colour' (expected: address)"), std::string::npos)
      << colour.output;
  CliRun address = shell(rank_command(0, 2, args + " --plugin-option tcp.address=nowhere"));
  EXPECT_NE(address.code, 0);
  EXPECT_NE(address.output.find("address 'nowhere' is not an IPv4 address"), std::string::npos)
      << address.output;
}

// Rank 0 alone of 2: a plugin that honours its timeout fails comm_create
// with TDM_TIMEOUT; one that ignores it is stopped by the watchdog (exit 3).
TEST_F(CommChoice, ARankThatNeverJoinsFailsInsteadOfHanging) {
  const std::string args =
      "'" TANDEM_SOURCE_DIR "/tests/packaging/tiny_synthetic.toml' --device reference:0 --comm-timeout 1";
  const auto start = std::chrono::steady_clock::now();
  CliRun honoured = shell(rank_command(
      0, 2, args + " --comm tcp --rendezvous file://" + dir_.file("a") + " --run-dir " + dir_.file("a-run")));
  EXPECT_EQ(honoured.code, 1) << honoured.output;
  EXPECT_NE(honoured.output.find("rank(s) 1 did not connect within the timeout"), std::string::npos)
      << honoured.output;
  CliRun ignored = shell(rank_command(0, 2,
                                      args + " --comm tcp_ignore_timeout --rendezvous file://" +
                                          dir_.file("b") + " --run-dir " + dir_.file("b-run") +
                                          " --plugin-path '" + TANDEM_COMM_PLUGIN_DIR + "/ignore_timeout'"));
  EXPECT_EQ(ignored.code, 3) << ignored.output;
  EXPECT_NE(ignored.output.find("comm_create of comm plugin 'tcp_ignore_timeout'"), std::string::npos)
      << ignored.output;
  EXPECT_NE(ignored.output.find("does not end a collective at tdm_comm_init_info.timeout_seconds"),
            std::string::npos)
      << ignored.output;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 30) << "both stopped within their timeouts and the watchdog's grace";
}

}  // namespace
}  // namespace tandem::test
