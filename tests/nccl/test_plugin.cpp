// The built NCCL plugin, loaded the way the host loads it. Loading, the
// descriptor and argument checks run on every machine; the GPU tests create
// a one-rank communicator on GPU 0 and report SKIPPED with the plugin's
// (the CUDA runtime's) reason where no GPU is usable; the tests of 2 and 4
// ranks need as many GPUs.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tandem/tandem.h"

namespace {

thread_local std::string g_error;

void host_log(void*, tdm_log_level, const char* message) {
  std::fprintf(stderr, "[nccl] %s\n", message);
}
void host_set_error(void*, tdm_status, const char* format, ...) {
  char text[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  g_error = text;
}

const tdm_plugin* plugin() {
  static const tdm_plugin* p = [] {
    static tdm_host_api host{};
    host.struct_size = sizeof host;
    host.abi_major = TDM_ABI_MAJOR;
    host.abi_minor = TDM_ABI_MINOR;
    host.log = host_log;
    host.set_error = host_set_error;
    void* lib = dlopen(TANDEM_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      g_error = dlerror();
      return static_cast<const tdm_plugin*>(nullptr);
    }
    auto entry = reinterpret_cast<tdm_plugin_entry_fn>(dlsym(lib, TDM_PLUGIN_ENTRY_SYMBOL));
    return entry != nullptr ? entry(&host, TDM_ABI_MAJOR, TDM_ABI_MINOR) : nullptr;
  }();
  return p;
}

// A one-rank communicator, or the reason there is none.
tdm_comm* one_rank(double timeout, std::string& why) {
  const tdm_comm_api* api = plugin()->comm;
  std::vector<char> id(4096);
  size_t bytes = id.size();
  g_error.clear();
  if (api->comm_unique_id(id.data(), &bytes) != TDM_OK) {
    why = "comm_unique_id: " + g_error;
    return nullptr;
  }
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.rank = 0;
  info.world_size = 1;
  info.local_rank = 0;
  info.unique_id = id.data();
  info.unique_id_bytes = bytes;
  info.timeout_seconds = timeout;
  tdm_comm* comm = nullptr;
  if (api->comm_create(&info, &comm) != TDM_OK) {
    why = g_error;
    return nullptr;
  }
  return comm;
}

}  // namespace

TEST(NcclPlugin, LoadsWithoutADriverAndDescribesItself) {
  const tdm_plugin* p = plugin();
  ASSERT_NE(p, nullptr) << g_error;
  EXPECT_STREQ(p->name, "nccl");
  EXPECT_EQ(p->kind, TDM_PLUGIN_COMM);
  ASSERT_NE(p->comm, nullptr);
  EXPECT_NE(p->comm->comm_unique_id, nullptr);
  std::string nccl, runtime;
  for (size_t i = 0; i < p->n_vendors; ++i) {
    if (std::string(p->vendors[i].name) == "NCCL") nccl = p->vendors[i].version;
    if (std::string(p->vendors[i].name) == "CUDA runtime") runtime = p->vendors[i].version;
  }
  EXPECT_EQ(nccl.rfind("2.", 0), 0u) << nccl;
  EXPECT_FALSE(runtime.empty());
}

TEST(NcclPlugin, UniqueIdSaysHowManyBytesItNeeds) {
  ASSERT_NE(plugin(), nullptr) << g_error;
  char small[8];
  size_t bytes = sizeof small;
  g_error.clear();
  EXPECT_EQ(plugin()->comm->comm_unique_id(small, &bytes), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 128u);  // sizeof(ncclUniqueId)
  EXPECT_NE(g_error.find("128 bytes"), std::string::npos) << g_error;
}

TEST(NcclPlugin, CreateWithoutTheRendezvousIdIsRefused) {
  ASSERT_NE(plugin(), nullptr) << g_error;
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.world_size = 2;
  tdm_comm* comm = nullptr;
  g_error.clear();
  EXPECT_EQ(plugin()->comm->comm_create(&info, &comm), TDM_INVALID_ARGUMENT);
  EXPECT_NE(g_error.find("comm_unique_id"), std::string::npos) << g_error;
}

class NcclGpu : public ::testing::TestWithParam<double> {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin(), nullptr) << g_error;
    std::string why;
    comm_ = one_rank(GetParam(), why);
    if (comm_ == nullptr) GTEST_SKIP() << "no usable GPU: " << why;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&a_, 4096), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b_, 4096), cudaSuccess);
  }
  void TearDown() override {
    if (comm_ != nullptr) plugin()->comm->comm_destroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaFree(a_);
    cudaFree(b_);
  }
  std::vector<float> read(void* p, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  tdm_comm* comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* a_ = nullptr;
  void* b_ = nullptr;
};

// With one rank every collective is a copy (AVG divides by 1).
TEST_P(NcclGpu, CollectivesOnOneRank) {
  const tdm_comm_api* api = plugin()->comm;
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 100.5f;
  ASSERT_EQ(cudaMemcpy(a_, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  for (tdm_reduce_op op : {TDM_REDUCE_SUM, TDM_REDUCE_MAX, TDM_REDUCE_MIN, TDM_REDUCE_AVG}) {
    ASSERT_EQ(cudaMemset(b_, 0, 4096), cudaSuccess);
    ASSERT_EQ(api->allreduce(comm_, a_, b_, v.size(), TDM_F32, op, stream_), TDM_OK) << g_error;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(read(b_, v.size()), v) << "op " << op;
  }
  ASSERT_EQ(cudaMemset(b_, 0, 4096), cudaSuccess);
  ASSERT_EQ(api->allgather(comm_, a_, b_, v.size(), TDM_F32, stream_), TDM_OK) << g_error;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(read(b_, v.size()), v);
  ASSERT_EQ(cudaMemset(b_, 0, 4096), cudaSuccess);
  ASSERT_EQ(api->reduce_scatter(comm_, a_, b_, v.size(), TDM_F32, TDM_REDUCE_SUM, nullptr), TDM_OK)
      << g_error;
  EXPECT_EQ(read(b_, v.size()), v);  // stream NULL: complete on return
  ASSERT_EQ(api->broadcast(comm_, a_, v.size(), TDM_F32, 0, stream_), TDM_OK) << g_error;
  EXPECT_EQ(api->broadcast(comm_, a_, v.size(), TDM_F32, 1, stream_), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(api->barrier(comm_), TDM_OK) << g_error;
  for (tdm_dtype t : {TDM_F64, TDM_F16, TDM_BF16, TDM_S8, TDM_U8, TDM_S32, TDM_S64})
    EXPECT_EQ(api->allreduce(comm_, a_, b_, 64, t, TDM_REDUCE_SUM, stream_), TDM_OK) << "dtype " << t;
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// What the host's streamed all-reduce (host/train/streamed_allreduce.hpp)
// asks of the plugin, in CUDA terms: two gradients written late on a
// compute stream (it sleeps first), packed on a comm stream that waits on an
// event recorded after them, averaged there, and the compute stream waiting
// on the comm stream's event before it reads the bucket. One rank: AVG is
// the identity, so the bucket holds what the compute stream wrote; without
// the event the comm stream would pack the zeros it found.
TEST_P(NcclGpu, BucketOnACommStreamWaitsForItsProducers) {
  const tdm_comm_api* api = plugin()->comm;
  cudaStream_t compute = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  void* pinned = nullptr;  // the copies must not wait on the host
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 2 * 4096), cudaSuccess);
  auto* host = static_cast<float*>(pinned);
  for (size_t i = 0; i < 1024; ++i) host[i] = float(i) * 0.5f - 7.0f;
  ASSERT_EQ(cudaMemset(a_, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  auto nap = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  ASSERT_EQ(cudaLaunchHostFunc(compute, nap, nullptr), cudaSuccess);
  auto* grads = static_cast<char*>(a_);
  ASSERT_EQ(cudaMemcpyAsync(grads, host, 1000, cudaMemcpyHostToDevice, compute), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(grads + 1000, host + 250, 3096, cudaMemcpyHostToDevice, compute), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ready, compute), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream_, ready, 0), cudaSuccess);
  auto* bucket = static_cast<char*>(b_);
  ASSERT_EQ(cudaMemcpyAsync(bucket, grads, 1000, cudaMemcpyDeviceToDevice, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(bucket + 1000, grads + 1000, 3096, cudaMemcpyDeviceToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(api->allreduce(comm_, b_, b_, 1024, TDM_F32, TDM_REDUCE_AVG, stream_), TDM_OK) << g_error;
  ASSERT_EQ(cudaEventRecord(done, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(compute, done, 0), cudaSuccess);
  float* out = host + 1024;
  ASSERT_EQ(cudaMemcpyAsync(out, b_, 4096, cudaMemcpyDeviceToHost, compute), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  EXPECT_EQ(std::vector<float>(out, out + 1024), std::vector<float>(host, host + 1024));
  cudaFreeHost(pinned);
  cudaEventDestroy(ready);
  cudaEventDestroy(done);
  cudaStreamDestroy(compute);
}

// 0: blocking communicator, no watchdog; 30: non-blocking + watchdog.
INSTANTIATE_TEST_SUITE_P(Timeouts, NcclGpu, ::testing::Values(0.0, 30.0));

// Runs `rank(r, world, id)` for each of `world` ranks, one GPU each, as
// threads of this process, into `results`; or says why not (fewer GPUs than
// ranks: the caller skips).
template <class Result>
std::optional<std::string> on_gpus(int world, Result (*rank)(int, int, const std::vector<char>&),
                                   std::vector<Result>& results) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  if (gpus < world)
    return std::to_string(world) + " ranks need " + std::to_string(world) +
           " GPUs, one each; this machine has " + std::to_string(gpus);
  std::vector<char> id(4096);
  size_t bytes = id.size();
  EXPECT_EQ(plugin()->comm->comm_unique_id(id.data(), &bytes), TDM_OK) << g_error;
  id.resize(bytes);
  results.assign(size_t(world), Result{});
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back([&, r] { results[size_t(r)] = rank(r, world, id); });
  for (std::thread& t : ranks) t.join();
  return std::nullopt;
}

// Rank `rank` of `world`'s communicator on GPU `rank` (a 30 s timeout), or
// null with g_error set.
tdm_comm* rank_on_gpu(int rank, int world, const std::vector<char>& id, bool point_to_point) {
  if (cudaSetDevice(rank) != cudaSuccess) return nullptr;
  tdm_comm_init_info info{};
  info.struct_size = sizeof info;
  info.rank = rank;
  info.world_size = world;
  info.local_rank = rank;
  info.unique_id = id.data();
  info.unique_id_bytes = id.size();
  info.timeout_seconds = 30;
  info.device = rank;
  info.point_to_point = point_to_point ? 1 : 0;
  tdm_comm* comm = nullptr;
  return plugin()->comm->comm_create(&info, &comm) == TDM_OK ? comm : nullptr;
}

// 2 and 4 ranks, one GPU each, as threads of this process (SKIPPED where
// the machine has fewer GPUs than ranks), doing what ZeRO asks of them: each
// rank's gradient of 10 elements, padded as the host pads it to whole
// shards (4 of 3, or 2 of 5), averaged into the rank's shard by
// reduce_scatter AVG, and the shards all-gathered whole on the same stream.
class NcclRanks : public ::testing::TestWithParam<int> {};

struct RankResult {
  std::string error;
  std::vector<float> shard, whole;
};

RankResult zero_exchanges(int rank, int world, const std::vector<char>& id) {
  RankResult out;
  const tdm_comm_api* api = plugin()->comm;
  constexpr size_t n = 10;
  const size_t shard = (n + world - 1) / world, padded = shard * world;
  auto fail = [&](const std::string& what) {
    out.error = "rank " + std::to_string(rank) + ": " + what + " " + g_error;
    return out;
  };
  tdm_comm* comm = rank_on_gpu(rank, world, id, false);
  if (comm == nullptr) return fail("cudaSetDevice or comm_create");
  cudaStream_t stream = nullptr;
  void *send = nullptr, *mine = nullptr, *whole = nullptr;
  std::vector<float> gradient(padded, 0.0f);
  for (size_t i = 0; i < n; ++i) gradient[i] = float(i) + 10.0f * float(rank);
  bool ok = cudaStreamCreate(&stream) == cudaSuccess && cudaMalloc(&send, padded * 4) == cudaSuccess &&
            cudaMalloc(&mine, shard * 4) == cudaSuccess && cudaMalloc(&whole, padded * 4) == cudaSuccess &&
            cudaMemcpy(send, gradient.data(), padded * 4, cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok && api->reduce_scatter(comm, send, mine, shard, TDM_F32, TDM_REDUCE_AVG, stream) != TDM_OK) {
    fail("reduce_scatter");
    ok = false;
  }
  if (ok && api->allgather(comm, mine, whole, shard, TDM_F32, stream) != TDM_OK) {
    fail("allgather");
    ok = false;
  }
  if (ok && cudaStreamSynchronize(stream) == cudaSuccess) {
    out.shard.resize(shard);
    out.whole.resize(padded);
    cudaMemcpy(out.shard.data(), mine, shard * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(out.whole.data(), whole, padded * 4, cudaMemcpyDeviceToHost);
  } else if (out.error.empty()) {
    fail("the CUDA calls around the collectives failed");
  }
  api->comm_destroy(comm);
  cudaFree(send);
  cudaFree(mine);
  cudaFree(whole);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return out;
}

TEST_P(NcclRanks, ReduceScatterAndGatherUnevenShardsAsZeroDoes) {
  ASSERT_NE(plugin(), nullptr) << g_error;
  const int world = GetParam();
  std::vector<RankResult> results;
  if (auto why = on_gpus(world, zero_exchanges, results)) GTEST_SKIP() << *why;
  // The mean over ranks of i + 10 r, and the padding's zeros.
  const size_t shard = results[0].shard.size();
  std::vector<float> mean(shard * world, 0.0f);
  for (size_t i = 0; i < 10; ++i) mean[i] = float(i) + 5.0f * float(world - 1);
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(results[r].error.empty()) << results[r].error;
    EXPECT_EQ(results[r].whole, mean) << "rank " << r;
    EXPECT_EQ(results[r].shard, std::vector<float>(mean.begin() + r * shard, mean.begin() + (r + 1) * shard))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclRanks, ::testing::Values(2, 4));

// Point to point as a pipeline's stages use it (ABI 1.16 on a communicator
// created with point_to_point, ABI 1.17), 2 and 4 ranks in a line, one GPU
// each: every rank first starts its receives from both neighbours, four
// messages each (a window ahead, as the host posts them), then its sends to
// both. On one NCCL communicator the early receives would hold the sends
// back and the ranks would wait on each other; each ordered pair's lane
// must deliver every message, in order, within the timeout.
struct Line {
  std::string error;
  std::vector<std::vector<float>> received;  // by neighbour, then message
};

Line line_exchange(int rank, int world, const std::vector<char>& id) {
  Line out;
  const tdm_comm_api* api = plugin()->comm;
  constexpr int kMessages = 4;
  constexpr size_t n = 1024;
  auto fail = [&](const std::string& what) {
    out.error = "rank " + std::to_string(rank) + ": " + what + " " + g_error;
    return out;
  };
  tdm_comm* comm = rank_on_gpu(rank, world, id, true);
  if (comm == nullptr) return fail("cudaSetDevice or comm_create");
  std::vector<int> peers;
  if (rank > 0) peers.push_back(rank - 1);
  if (rank + 1 < world) peers.push_back(rank + 1);
  // Message m from rank r to rank p holds 1000 r + 100 p + m everywhere.
  std::vector<void*> buffers;
  std::vector<tdm_comm_request*> requests;
  bool ok = true;
  for (int p : peers)
    for (int m = 0; m < kMessages && ok; ++m) {
      void* b = nullptr;
      ok = cudaMalloc(&b, n * 4) == cudaSuccess;
      buffers.push_back(b);
      tdm_comm_request* q = nullptr;
      ok = ok && api->recv_start(comm, b, n, TDM_F32, p, nullptr, &q) == TDM_OK;
      requests.push_back(q);
    }
  const size_t receives = requests.size();
  for (int p : peers)
    for (int m = 0; m < kMessages && ok; ++m) {
      void* b = nullptr;
      std::vector<float> values(n, float(1000 * rank + 100 * p + m));
      ok = cudaMalloc(&b, n * 4) == cudaSuccess &&
           cudaMemcpy(b, values.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess;
      buffers.push_back(b);
      tdm_comm_request* q = nullptr;
      ok = ok && api->send_start(comm, b, n, TDM_F32, p, nullptr, &q) == TDM_OK;
      requests.push_back(q);
    }
  if (!ok) fail("starting the transfers");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t i = 0; ok && i < requests.size(); ++i) {
    int32_t done = 0;
    while (ok && !done) {
      ok = api->request_test(comm, requests[i], &done) == TDM_OK && std::chrono::steady_clock::now() < until;
      std::this_thread::yield();
    }
    if (!ok) fail("transfer " + std::to_string(i) + " did not finish");
  }
  for (size_t k = 0; ok && k < receives; ++k) {
    if (k % kMessages == 0) out.received.emplace_back();
    std::vector<float> values(n);
    cudaMemcpy(values.data(), buffers[k], n * 4, cudaMemcpyDeviceToHost);
    out.received.back().push_back(values[n - 1]);
    if (std::any_of(values.begin(), values.end(), [&](float v) { return v != values[0]; }))
      fail("message " + std::to_string(k) + " arrived torn");
  }
  api->comm_destroy(comm);
  for (void* b : buffers) cudaFree(b);
  return out;
}

TEST_P(NcclRanks, StartedReceivesAheadOfSendsNeverHoldThemBack) {
  ASSERT_NE(plugin(), nullptr) << g_error;
  const int world = GetParam();
  std::vector<Line> results;
  if (auto why = on_gpus(world, line_exchange, results)) GTEST_SKIP() << *why;
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(results[r].error.empty()) << results[r].error;
    std::vector<int> peers;
    if (r > 0) peers.push_back(r - 1);
    if (r + 1 < world) peers.push_back(r + 1);
    ASSERT_EQ(results[r].received.size(), peers.size());
    for (size_t k = 0; k < peers.size(); ++k)
      for (int m = 0; m < 4; ++m)
        EXPECT_EQ(results[r].received[k][size_t(m)], float(1000 * peers[k] + 100 * r + m))
            << "rank " << r << " from " << peers[k] << ", message " << m;
  }
}
