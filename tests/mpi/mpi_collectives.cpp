// The built mpi plugin, loaded the way the host loads it (dlopen, a minimal
// host table) and run under mpiexec by ctest (see CMakeLists.txt).
//
//   mpi_collectives collectives    every collective and dtype, exact values
//                                  (bf16/f16 within a tolerance), with and
//                                  without a timeout (non-blocking path),
//                                  and in groups of ranks; send and recv
//                                  on two threads at once
//   mpi_collectives peer-failure   rank 1 dies before an allreduce; rank 0
//                                  must get TDM_TIMEOUT naming the
//                                  collective and rank 1 within the timeout
//
// Plain C++ (no gtest): every rank prints "N passed, N failed" and exits
// non-zero on a failure.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "../../plugins/mpi/half.hpp"
#include "tandem/tandem.h"

namespace {

thread_local std::string g_error;
int g_rank = -1;
int g_passed = 0, g_failed = 0;

void host_log(void*, tdm_log_level level, const char* message) {
  std::fprintf(stderr, "[rank %d log %d] %s\n", g_rank, int(level), message);
}
void host_set_error(void*, tdm_status, const char* format, ...) {
  char text[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  g_error = text;
}
tdm_status host_config_get(void*, const char*, char*, size_t*) {
  return TDM_NOT_FOUND;
}
void* host_scratch_alloc(void*, size_t bytes, size_t alignment) {
  return std::aligned_alloc(alignment < 64 ? 64 : alignment, (bytes + 63) / 64 * 64);
}
void host_scratch_free(void*, void* p) {
  std::free(p);
}

tdm_host_api make_host() {
  tdm_host_api h{};
  h.struct_size = sizeof h;
  h.abi_major = TDM_ABI_MAJOR;
  h.abi_minor = TDM_ABI_MINOR;
  h.log = host_log;
  h.set_error = host_set_error;
  h.config_get = host_config_get;
  h.scratch_alloc = host_scratch_alloc;
  h.scratch_free = host_scratch_free;
  return h;
}

void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::fprintf(stderr, "[rank %d] FAILED: %s%s%s\n", g_rank, what.c_str(), g_error.empty() ? "" : " -- ",
                 g_error.c_str());
  }
}

const tdm_comm_api* g_api = nullptr;

tdm_comm* create(int rank, int size, double timeout, int32_t group = 0) {
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.rank = rank;
  info.world_size = size;
  info.local_rank = -1;
  info.timeout_seconds = timeout;
  info.device = -1;
  info.group = group;
  tdm_comm* comm = nullptr;
  const tdm_status s = g_api->comm_create(&info, &comm);
  check(s == TDM_OK && comm != nullptr, "comm_create");
  return comm;
}

template <class T>
void expect_eq(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  check(got == want, what);
}

// allreduce of f32 (SUM, MAX, MIN, AVG, in place) and s32 (SUM, MAX, AVG).
void allreduce_cases(tdm_comm* comm, int r, int n, const std::string& tag) {
  const size_t k = 1000;
  {  // f32 SUM / MAX / MIN / AVG: values are small integers, sums are exact
    std::vector<float> send(k), out(k), sum(k), max(k), min(k), avg(k);
    for (size_t i = 0; i < k; ++i) {
      send[i] = float((r + 1) * int(i % 17));
      float s = 0;
      for (int q = 0; q < n; ++q) s += float((q + 1) * int(i % 17));
      sum[i] = s, max[i] = float(n * int(i % 17)), min[i] = float(i % 17), avg[i] = s / float(n);
    }
    const std::pair<tdm_reduce_op, std::vector<float>*> cases[] = {
        {TDM_REDUCE_SUM, &sum}, {TDM_REDUCE_MAX, &max}, {TDM_REDUCE_MIN, &min}, {TDM_REDUCE_AVG, &avg}};
    for (const auto& [op, want] : cases) {
      check(g_api->allreduce(comm, send.data(), out.data(), k, TDM_F32, op, nullptr) == TDM_OK,
            "allreduce f32");
      expect_eq(out, *want, tag + " allreduce f32 op " + std::to_string(op));
    }
    std::vector<float> inplace = send;  // send == recv
    check(
        g_api->allreduce(comm, inplace.data(), inplace.data(), k, TDM_F32, TDM_REDUCE_SUM, nullptr) == TDM_OK,
        "allreduce in place");
    expect_eq(inplace, sum, tag + " allreduce f32 in place");
  }
  {  // s32 SUM / MAX / AVG (AVG truncates toward zero)
    std::vector<int32_t> send(k), out(k), sum(k), max(k), avg(k);
    for (size_t i = 0; i < k; ++i) {
      send[i] = int32_t(i) * (r + 1) - 7;
      int32_t s = 0;
      for (int q = 0; q < n; ++q) s += int32_t(i) * (q + 1) - 7;
      sum[i] = s, max[i] = int32_t(i) * n - 7, avg[i] = s / n;
    }
    check(g_api->allreduce(comm, send.data(), out.data(), k, TDM_S32, TDM_REDUCE_SUM, nullptr) == TDM_OK,
          "s32");
    expect_eq(out, sum, tag + " allreduce s32 SUM");
    check(g_api->allreduce(comm, send.data(), out.data(), k, TDM_S32, TDM_REDUCE_MAX, nullptr) == TDM_OK,
          "s32");
    expect_eq(out, max, tag + " allreduce s32 MAX");
    check(g_api->allreduce(comm, send.data(), out.data(), k, TDM_S32, TDM_REDUCE_AVG, nullptr) == TDM_OK,
          "s32");
    expect_eq(out, avg, tag + " allreduce s32 AVG");
  }
}

// allgather, reduce_scatter and broadcast.
void movement_cases(tdm_comm* comm, int r, int n, const std::string& tag) {
  const size_t k = 1000;
  {  // allgather s64: rank-major blocks
    std::vector<int64_t> send(k), out(k * size_t(n)), want(k * size_t(n));
    for (size_t i = 0; i < k; ++i) send[i] = int64_t(r) * 1000000 + int64_t(i);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < k; ++i) want[size_t(q) * k + i] = int64_t(q) * 1000000 + int64_t(i);
    check(g_api->allgather(comm, send.data(), out.data(), k, TDM_S64, nullptr) == TDM_OK, "allgather");
    expect_eq(out, want, tag + " allgather s64");
  }
  {  // reduce_scatter f32 SUM: rank r gets block r of the sum
    std::vector<float> send(k * size_t(n)), out(k), want(k);
    for (size_t i = 0; i < send.size(); ++i) send[i] = float(int(i % 101) + r);
    for (size_t i = 0; i < k; ++i) {
      const size_t j = size_t(r) * k + i;
      float s = 0;
      for (int q = 0; q < n; ++q) s += float(int(j % 101) + q);
      want[i] = s;
    }
    check(g_api->reduce_scatter(comm, send.data(), out.data(), k, TDM_F32, TDM_REDUCE_SUM, nullptr) == TDM_OK,
          "reduce_scatter");
    expect_eq(out, want, tag + " reduce_scatter f32 SUM");
  }
  {  // broadcast f64 and u8 from the last rank (rank 1 of 2)
    const int root = n - 1;
    std::vector<double> buf(k, r == root ? 0.0 : -1.0), want(k);
    for (size_t i = 0; i < k; ++i) want[i] = double(i) * 0.25;
    if (r == root) buf = want;
    check(g_api->broadcast(comm, buf.data(), k, TDM_F64, root, nullptr) == TDM_OK, "broadcast");
    expect_eq(buf, want, tag + " broadcast f64 from rank " + std::to_string(root));
    std::vector<uint8_t> bytes(k, uint8_t(r == root ? 0 : 1)), bwant(k);
    for (size_t i = 0; i < k; ++i) bwant[i] = uint8_t(i * 7);
    if (r == root) bytes = bwant;
    check(g_api->broadcast(comm, bytes.data(), k, TDM_U8, root, nullptr) == TDM_OK, "broadcast u8");
    expect_eq(bytes, bwant, tag + " broadcast u8");
  }
}

// allreduce of bf16 and f16.
void half_precision_cases(tdm_comm* comm, int r, int n, const std::string& tag) {
  const size_t k = 1000;
  {                          // bf16 and f16 SUM: rounded at every step, so within 1% of the f32 sum
    using namespace tandem;  // the SDK's f16/bf16 conversions (tandem/half.hpp)
    std::vector<uint16_t> bsend(k), bout(k), hsend(k), hout(k);
    std::vector<float> want(k);
    for (size_t i = 0; i < k; ++i) {
      const float v = 0.1f * float(int(i % 50) - 25) * float(r + 1);
      bsend[i] = f32_to_bf16(v), hsend[i] = f32_to_f16(v);
      float s = 0;
      for (int q = 0; q < n; ++q) s += 0.1f * float(int(i % 50) - 25) * float(q + 1);
      want[i] = s;
    }
    check(g_api->allreduce(comm, bsend.data(), bout.data(), k, TDM_BF16, TDM_REDUCE_SUM, nullptr) == TDM_OK,
          "bf16");
    check(g_api->allreduce(comm, hsend.data(), hout.data(), k, TDM_F16, TDM_REDUCE_SUM, nullptr) == TDM_OK,
          "f16");
    bool bf_ok = true, h_ok = true;
    for (size_t i = 0; i < k; ++i) {
      const float tol = 0.01f * std::fabs(want[i]) + 1e-3f;
      bf_ok = bf_ok && std::fabs(bf16_to_f32(bout[i]) - want[i]) <= tol;
      h_ok = h_ok && std::fabs(f16_to_f32(hout[i]) - want[i]) <= tol;
    }
    check(bf_ok, tag + " allreduce bf16 SUM within 1%");
    check(h_ok, tag + " allreduce f16 SUM within 1%");
  }
}

// Every collective on `comm`, for a world of `n` ranks; this process is `r`.
void collectives(tdm_comm* comm, int r, int n, const std::string& tag) {
  allreduce_cases(comm, r, n, tag);
  movement_cases(comm, r, n, tag);
  check(g_api->barrier(comm) == TDM_OK, tag + " barrier");
  half_precision_cases(comm, r, n, tag);
}

// Point to point (ABI 1.15): a ring where every rank sends to the next and
// receives from the one before on two threads at once (as the pipeline's
// sending and receiving threads do), messages arriving in the order sent,
// large enough for MPI's rendezvous protocol; a bad peer refused.
void point_to_point_cases(tdm_comm* comm, int r, int n, const std::string& tag) {
  check(g_api->send != nullptr && g_api->recv != nullptr, tag + " send and recv are in the table");
  if (g_api->send == nullptr || g_api->recv == nullptr) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  constexpr int kMessages = 5;
  constexpr size_t kCount = size_t(1) << 18;  // 1 MiB of f32: beyond the eager limit
  std::vector<std::vector<float>> got(kMessages, std::vector<float>(kCount));
  tdm_status sent = TDM_OK;
  std::thread sender([&] {
    for (int m = 0; m < kMessages && sent == TDM_OK; ++m) {
      std::vector<float> message(kCount, float(r * 100 + m));
      sent = g_api->send(comm, message.data(), kCount, TDM_F32, next, nullptr);
    }
  });
  tdm_status received = TDM_OK;
  for (int m = 0; m < kMessages && received == TDM_OK; ++m)
    received = g_api->recv(comm, got[size_t(m)].data(), kCount, TDM_F32, previous, nullptr);
  sender.join();
  check(sent == TDM_OK && received == TDM_OK, tag + " send and recv on two threads");
  bool in_order = true;
  for (int m = 0; m < kMessages; ++m)
    in_order = in_order && got[size_t(m)].front() == float(previous * 100 + m) &&
               got[size_t(m)].back() == float(previous * 100 + m);
  check(in_order, tag + " messages arrive whole and in the order sent");
  float one = 1;
  g_error.clear();
  check(g_api->send(comm, &one, 1, TDM_F32, r, nullptr) == TDM_INVALID_ARGUMENT &&
            g_error.find("not another rank") != std::string::npos,
        tag + " send to itself is refused");
  g_error.clear();
}

// Started transfers (ABI 1.16): one thread posts every receive of a ring,
// then every send, and asks request_test until all finished (as the
// pipeline's computing thread does): messages whole and in the order
// started, beyond the eager limit; a bad peer refused.
void started_transfer_cases(tdm_comm* comm, int r, int n, const std::string& tag) {
  check(g_api->send_start != nullptr && g_api->recv_start != nullptr && g_api->request_test != nullptr,
        tag + " send_start, recv_start and request_test are in the table");
  if (g_api->send_start == nullptr || g_api->recv_start == nullptr || g_api->request_test == nullptr) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  constexpr int kMessages = 6;
  constexpr size_t kCount = size_t(1) << 18;
  std::vector<std::vector<float>> got(kMessages, std::vector<float>(kCount)), sent(kMessages);
  std::vector<tdm_comm_request*> pending;
  bool started = true;
  for (int m = 0; m < kMessages; ++m) {
    tdm_comm_request* q = nullptr;
    started =
        started &&
        g_api->recv_start(comm, got[size_t(m)].data(), kCount, TDM_F32, previous, nullptr, &q) == TDM_OK &&
        q != nullptr;
    pending.push_back(q);
  }
  for (int m = 0; m < kMessages; ++m) {
    sent[size_t(m)].assign(kCount, float(r * 100 + m));
    tdm_comm_request* q = nullptr;
    started = started &&
              g_api->send_start(comm, sent[size_t(m)].data(), kCount, TDM_F32, next, nullptr, &q) == TDM_OK &&
              q != nullptr;
    pending.push_back(q);
  }
  check(started, tag + " send_start and recv_start return at once with a request");
  if (!started) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool tested = true;
  while (!pending.empty() && tested && std::chrono::steady_clock::now() < deadline)
    for (size_t i = 0; i < pending.size();) {
      int32_t done = 0;
      tested = g_api->request_test(comm, pending[i], &done) == TDM_OK;
      if (!tested) break;
      if (done)
        pending.erase(pending.begin() + std::ptrdiff_t(i));
      else
        ++i;
    }
  check(tested && pending.empty(), tag + " request_test reports every transfer finished");
  bool in_order = true;
  for (int m = 0; m < kMessages; ++m)
    in_order = in_order && got[size_t(m)].front() == float(previous * 100 + m) &&
               got[size_t(m)].back() == float(previous * 100 + m);
  check(in_order, tag + " started messages arrive whole and in the order started");
  float one = 1;
  tdm_comm_request* q = nullptr;
  g_error.clear();
  check(g_api->send_start(comm, &one, 1, TDM_F32, r, nullptr, &q) == TDM_INVALID_ARGUMENT &&
            g_error.find("not another rank") != std::string::npos,
        tag + " send_start to itself is refused");
  g_error.clear();
}

int run_collectives(int r, int n) {
  tdm_comm* blocking = create(r, n, 0.0);
  tdm_comm* polled = create(r, n, 30.0);
  if (blocking != nullptr) collectives(blocking, r, n, "blocking");
  if (polled != nullptr) collectives(polled, r, n, "timeout-30s");
  if (blocking != nullptr) point_to_point_cases(blocking, r, n, "no timeout");
  if (polled != nullptr) point_to_point_cases(polled, r, n, "timeout-30s");
  if (polled != nullptr) started_transfer_cases(polled, r, n, "started");
  // Groups (ABI 1.10): each rank alone in a group of its own, whose sum is
  // its own value; then both ranks in group 7, a communicator like the first.
  if (tdm_comm* alone = create(0, 1, 0.0, r)) {
    int32_t value = r + 1;
    check(g_api->allreduce(alone, &value, &value, 1, TDM_S32, TDM_REDUCE_SUM, nullptr) == TDM_OK &&
              value == r + 1,
          "a group of one sums its own value");
    g_api->comm_destroy(alone);
  }
  if (tdm_comm* both = create(r, n, 0.0, 7)) {
    collectives(both, r, n, "group-7");
    g_api->comm_destroy(both);
  }
  // The plugin refuses a rank that disagrees with MPI's (a local check).
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.rank = r + 1;
  info.world_size = n + 1;
  tdm_comm* bad = nullptr;
  g_error.clear();
  const tdm_status s = g_api->comm_create(&info, &bad);
  check(s == TDM_INVALID_ARGUMENT && g_error.find("MPI says this process is rank") != std::string::npos,
        "comm_create refuses a wrong rank");
  g_error.clear();
  if (blocking != nullptr) g_api->comm_destroy(blocking);
  if (polled != nullptr) g_api->comm_destroy(polled);
  return 0;
}

// This process's CPU time (every thread), in seconds.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

int run_peer_failure(int r, int n) {
  tdm_comm* comm = create(r, n, 3.0);
  if (comm == nullptr) return 1;
  check(g_api->barrier(comm) == TDM_OK, "barrier before the failure");
  if (r == 1) {
    std::fflush(nullptr);
    std::_Exit(0);  // dies without MPI_Finalize: see CMakeLists.txt for mpiexec's side
  }
  std::vector<float> send(256, 1.0f), recv(256);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  g_error.clear();
  const tdm_status s =
      g_api->allreduce(comm, send.data(), recv.data(), send.size(), TDM_F32, TDM_REDUCE_SUM, nullptr);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double busy = cpu_seconds() - cpu0;
  std::fprintf(stderr, "[rank %d] allreduce returned %d after %.2f s: %s\n", r, int(s), waited,
               g_error.c_str());
  check(s == TDM_TIMEOUT, "allreduce returns TDM_TIMEOUT when rank 1 is dead");
  check(g_error.find("allreduce") != std::string::npos, "the message names the collective");
  check(g_error.find("timed out after 3.") != std::string::npos, "the message says how long it waited");
  check(g_error.find("do not answer (dead, hung or busy): 1") != std::string::npos,
        "the message names rank 1");
  check(waited >= 3.0 && waited < 10.0, "the timeout fired after 3 s and before 10 s");
  std::fprintf(stderr, "[rank %d] used %.2f s of CPU while waiting %.2f s\n", r, busy, waited);
  check(busy < 0.5 * waited, "waiting for a dead peer does not hold a core (less than half the wait on CPU)");
  check(g_api->barrier(comm) == TDM_ABORTED, "the communicator is unusable afterwards");
  (void)n;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  void* lib = dlopen(TANDEM_MPI_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);  // as the host does
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", TANDEM_MPI_PLUGIN_PATH, dlerror());
    return 1;
  }
  auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(lib, TDM_PLUGIN_ENTRY_SYMBOL));
  static const tdm_host_api host = make_host();
  const tdm_plugin* plugin = entry != nullptr ? entry(&host, TDM_ABI_MAJOR, TDM_ABI_MINOR) : nullptr;
  if (plugin == nullptr || plugin->comm == nullptr) {
    std::fprintf(stderr, "the mpi plugin refused to load: %s\n", g_error.c_str());
    return 1;
  }
  g_api = plugin->comm;
  // No init: MPI starts with the first communicator (plugins/mpi/plugin.cpp).
  if (plugin->init != nullptr && plugin->init(nullptr) != TDM_OK) {
    std::fprintf(stderr, "init failed: %s\n", g_error.c_str());
    return 1;
  }
  // Rank and size as a launcher-aware host reads them (Open MPI's variables).
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size_env = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int r = rank_env ? std::atoi(rank_env) : 0, n = size_env ? std::atoi(size_env) : 1;
  g_rank = r;
  if (r == 0)
    for (size_t i = 0; i < plugin->n_vendors; ++i)
      std::printf("vendor: %s %s\n", plugin->vendors[i].name, plugin->vendors[i].version);
  check(n >= 2, "run with at least 2 ranks (mpiexec -np 2)");
  if (n >= 2) (mode == "peer-failure" ? run_peer_failure : run_collectives)(r, n);
  std::printf("[rank %d] %s: %d passed, %d failed\n", r, mode.c_str(), g_passed, g_failed);
  std::fflush(nullptr);
  plugin->shutdown();  // MPI_Finalize, or (after a timeout) not
  return g_failed == 0 ? 0 : 1;
}
