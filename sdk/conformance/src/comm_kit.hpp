// tandem-conformance on a comm plugin: its collectives on 1, 2 and 4 local
// processes the kit launches itself, every result checked exactly, and its
// timeout honoured (sdk/ABI.md rules 46 and 47).
//
// The parent (run_comm_kit) starts one worker process per rank — this same
// program with --comm-worker — and each worker loads the plugin, joins the
// others and runs the cases in one order, printing a line per case. A
// plugin with comm_unique_id gets rank 0's id through a file the kit
// writes, as the host's --rendezvous file:// does; one that bootstraps
// itself (MPI) is launched under mpiexec, whose variables it reads. The
// values are small integers, so every sum is exact in any order and the
// results are compared bit for bit. The last case leaves one rank out of an
// allreduce: the others must fail it with TDM_TIMEOUT within their timeout;
// a worker still running well past it is stopped and the plugin failed for
// ignoring timeout_seconds.
#pragma once

#include <string>
#include <vector>

#include "tandem/conformance/plugin_under_test.hpp"

namespace tandem::conformance {

struct CommKitOptions {
  std::vector<int> ranks = {1, 2, 4};  // the sizes to run
  double timeout_seconds = 3;          // tdm_comm_init_info.timeout_seconds of every worker
  OpenOptions open;                    // how the workers load the plugin
};

// Runs the kit on the comm plugin at `path`; the process's exit status: 0
// when every case passed on every size (a declined optional dtype is
// fine), 1 when one failed, 2 when it cannot run.
int run_comm_kit(const std::string& path, const CommKitOptions& options);

// One worker: rank `rank` of `world`, the rendezvous in directory `dir`.
// Prints "PASS|FAIL|UNSUPPORTED <case>[: why]" lines; exit status 0.
int run_comm_worker(const std::string& path, int rank, int world, const std::string& dir,
                    double timeout_seconds, const OpenOptions& open);

}  // namespace tandem::conformance
