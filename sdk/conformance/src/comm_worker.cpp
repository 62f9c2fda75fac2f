// One rank of the comm kit (comm_kit.hpp): loads the plugin, joins the
// other workers, runs every case in the same order and prints a line each.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm_kit.hpp"
#include "tandem/half.hpp"
#include "tandem/tandem.hpp"

namespace tandem::conformance {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Element `i` of a buffer of `dtype`, as a double, and back.
double load(tdm_dtype dtype, const std::vector<unsigned char>& b, size_t i) {
  const unsigned char* p = b.data() + i * dtype_size(dtype);
  auto read = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype) {
    case TDM_F32:
      return read(float{});
    case TDM_F64:
      return read(double{});
    case TDM_S32:
      return read(int32_t{});
    case TDM_S64:
      return static_cast<double>(read(int64_t{}));
    case TDM_U8:
      return read(uint8_t{});
    case TDM_BF16:
      return bf16_to_f32(read(uint16_t{}));
    case TDM_F16:
      return f16_to_f32(read(uint16_t{}));
    default:
      return 0;
  }
}

void store(tdm_dtype dtype, std::vector<unsigned char>& b, size_t i, double v) {
  unsigned char* p = b.data() + i * dtype_size(dtype);
  auto write = [&](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (dtype) {
    case TDM_F32:
      return write(static_cast<float>(v));
    case TDM_F64:
      return write(v);
    case TDM_S32:
      return write(static_cast<int32_t>(v));
    case TDM_S64:
      return write(static_cast<int64_t>(v));
    case TDM_U8:
      return write(static_cast<uint8_t>(v));
    case TDM_BF16:
      return write(f32_to_bf16(static_cast<float>(v)));
    case TDM_F16:
      return write(f32_to_f16(static_cast<float>(v)));
    default:
      return;
  }
}

// Small integers, exact in every dtype and in every sum of up to 4 ranks.
double summand(int rank, size_t i) {
  return (rank + 1) * static_cast<double>(i % 13 + 1);
}
double extreme(int rank, size_t i) {
  return static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 5) % 11) - 5);
}

class Worker {
 public:
  Worker(const tdm_comm_api& api, tdm_comm* comm, int rank, int world)
      : api_(api), comm_(comm), rank_(rank), world_(world) {}

  void run_all(double timeout_seconds, const std::string& dir) {
    for (tdm_dtype t : {TDM_F32, TDM_F64, TDM_S32, TDM_S64, TDM_BF16, TDM_F16})
      for (tdm_reduce_op op : {TDM_REDUCE_SUM, TDM_REDUCE_AVG, TDM_REDUCE_MAX, TDM_REDUCE_MIN}) {
        if (op == TDM_REDUCE_AVG && (t == TDM_S32 || t == TDM_S64)) continue;  // no integer mean
        const bool required = t == TDM_F32 || (t == TDM_S32 && op == TDM_REDUCE_MAX);
        for (size_t count : {size_t{1}, size_t{7}, size_t{4099}}) allreduce(t, op, count, false, required);
        allreduce(t, op, 7, true, required);
      }
    for (tdm_dtype t : {TDM_F32, TDM_BF16, TDM_U8})
      for (size_t count : {size_t{1}, size_t{1000}}) allgather(t, count, t == TDM_F32);
    for (tdm_reduce_op op : {TDM_REDUCE_SUM, TDM_REDUCE_AVG})
      for (size_t count : {size_t{3}, size_t{1001}}) reduce_scatter(TDM_F32, op, count, true);
    for (int root = 0; root < world_; ++root)
      for (tdm_dtype t : {TDM_F32, TDM_U8, TDM_S64}) broadcast(t, 33, root, t == TDM_F32);
    one(
        "barrier", true, [&] { return api_.barrier(comm_); }, [] { return std::string(); });
    if (world_ > 1) point_to_point();
    if (world_ > 1) started_transfers();
    if (world_ > 1) timeout(timeout_seconds, dir);
  }

 private:
  static const char* op_name(tdm_reduce_op op) {
    return op == TDM_REDUCE_SUM ? "sum" : op == TDM_REDUCE_AVG ? "avg" : op == TDM_REDUCE_MAX ? "max" : "min";
  }

  // Runs `call`, then `check` (the empty string when right), and prints the
  // case's line. A declined call (TDM_UNSUPPORTED) of a required case fails.
  void one(const std::string& name, bool required, const std::function<tdm_status()>& call,
           const std::function<std::string()>& check) {
    std::printf("RUN %s\n", name.c_str());
    std::fflush(stdout);
    clear_plugin_error();
    const tdm_status s = call_plugin(name.c_str(), call);
    std::string why;
    if (s == TDM_UNSUPPORTED && !required) {
      std::printf("UNSUPPORTED %s: %s\n", name.c_str(), last_plugin_error().c_str());
    } else if (s != TDM_OK) {
      why = (s == TDM_UNSUPPORTED ? "a required case was declined (status " : "status ") + std::to_string(s) +
            (s == TDM_UNSUPPORTED ? ")" : "") + ": " +
            (last_plugin_error().empty() ? "the plugin gave no message" : last_plugin_error());
      std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
    } else if (!(why = check()).empty()) {
      std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
    } else {
      std::printf("PASS %s\n", name.c_str());
    }
    std::fflush(stdout);
  }

  // The first element of `got` that is not `want(i)`, or "".
  static std::string compare(tdm_dtype t, const std::vector<unsigned char>& got, size_t count,
                             const std::function<double(size_t)>& want, const std::string& what) {
    std::vector<unsigned char> expected(dtype_size(t));
    for (size_t i = 0; i < count; ++i) {
      store(t, expected, 0, want(i));  // the value as the dtype holds it
      if (load(t, got, i) != load(t, expected, 0))
        return what + " element " + std::to_string(i) + " is " + std::to_string(load(t, got, i)) +
               ", expected " + std::to_string(load(t, expected, 0));
    }
    return "";
  }

  std::vector<unsigned char> filled(tdm_dtype t, size_t count,
                                    const std::function<double(size_t)>& value) const {
    std::vector<unsigned char> b(count * dtype_size(t));
    for (size_t i = 0; i < count; ++i) store(t, b, i, value(i));
    return b;
  }

  double reduced(tdm_reduce_op op, size_t i) const {
    double acc = op == TDM_REDUCE_MAX || op == TDM_REDUCE_MIN ? extreme(0, i) : 0;
    for (int r = 0; r < world_; ++r) {
      if (op == TDM_REDUCE_MAX) acc = std::max(acc, extreme(r, i));
      if (op == TDM_REDUCE_MIN) acc = std::min(acc, extreme(r, i));
      if (op == TDM_REDUCE_SUM || op == TDM_REDUCE_AVG) acc += summand(r, i);
    }
    return op == TDM_REDUCE_AVG ? acc / world_ : acc;
  }

  double mine(tdm_reduce_op op, size_t i) const {
    return op == TDM_REDUCE_MAX || op == TDM_REDUCE_MIN ? extreme(rank_, i) : summand(rank_, i);
  }

  void allreduce(tdm_dtype t, tdm_reduce_op op, size_t count, bool in_place, bool required) {
    const std::string name = std::string("allreduce ") + op_name(op) + " " + dtype_name(t) + " count " +
                             std::to_string(count) + (in_place ? " in place" : "");
    const auto send = filled(t, count, [&](size_t i) { return mine(op, i); });
    std::vector<unsigned char> in = send, out(send.size(), 0xA5);
    one(
        name, required,
        [&] {
          return api_.allreduce(comm_, in.data(), in_place ? in.data() : out.data(), count, t, op, nullptr);
        },
        [&] {
          if (!in_place && in != send) return std::string("the send buffer was changed");
          return compare(
              t, in_place ? in : out, count, [&](size_t i) { return reduced(op, i); }, "result");
        });
  }

  void allgather(tdm_dtype t, size_t count, bool required) {
    const auto send = filled(t, count, [&](size_t i) { return summand(rank_, i) + rank_; });
    std::vector<unsigned char> out(send.size() * static_cast<size_t>(world_), 0xA5);
    one(
        "allgather " + std::string(dtype_name(t)) + " count " + std::to_string(count), required,
        [&] { return api_.allgather(comm_, send.data(), out.data(), count, t, nullptr); },
        [&] {
          return compare(
              t, out, count * static_cast<size_t>(world_),
              [&](size_t i) {
                const int r = static_cast<int>(i / count);
                return summand(r, i % count) + r;
              },
              "gathered");
        });
  }

  void reduce_scatter(tdm_dtype t, tdm_reduce_op op, size_t count, bool required) {
    const size_t whole = count * static_cast<size_t>(world_);
    const auto send = filled(t, whole, [&](size_t i) { return mine(op, i); });
    std::vector<unsigned char> out(count * dtype_size(t), 0xA5);
    one(
        std::string("reduce_scatter ") + op_name(op) + " " + dtype_name(t) + " count " +
            std::to_string(count),
        required, [&] { return api_.reduce_scatter(comm_, send.data(), out.data(), count, t, op, nullptr); },
        [&] {
          return compare(
              t, out, count, [&](size_t i) { return reduced(op, static_cast<size_t>(rank_) * count + i); },
              "this rank's block");
        });
  }

  void broadcast(tdm_dtype t, size_t count, int root, bool required) {
    auto buffer = filled(t, count, [&](size_t i) { return rank_ == root ? summand(root, i) : 0.0; });
    one(
        "broadcast " + std::string(dtype_name(t)) + " count " + std::to_string(count) + " from rank " +
            std::to_string(root),
        required, [&] { return api_.broadcast(comm_, buffer.data(), count, t, root, nullptr); },
        [&] {
          return compare(
              t, buffer, count, [&](size_t i) { return summand(root, i); }, "received");
        });
  }

  // The point-to-point cases' ring: message m to the next rank holds
  // summand(rank, i) + m at element i, in f32, the last one large enough
  // for a library's rendezvous path.
  static constexpr size_t kRingCounts[] = {1, 1000, size_t(1) << 18};
  std::vector<unsigned char> ring_message(size_t m) const {
    return filled(TDM_F32, kRingCounts[m], [&](size_t i) { return summand(rank_, i) + double(m); });
  }
  // "" when every message in `got` is the previous rank's, else what differs.
  std::string check_ring(const std::vector<std::vector<unsigned char>>& got) const {
    const int previous = (rank_ + world_ - 1) % world_;
    for (size_t m = 0; m < std::size(kRingCounts); ++m)
      if (auto why = compare(
              TDM_F32, got[m], kRingCounts[m], [&](size_t i) { return summand(previous, i) + double(m); },
              "message " + std::to_string(m + 1) + " from rank " + std::to_string(previous));
          !why.empty())
        return why;
    return std::string();
  }
  static void unsupported(const std::string& name, const char* why) {
    std::printf("UNSUPPORTED %s: %s\n", name.c_str(), why);
    std::fflush(stdout);
  }

  // ABI 1.15's optional send and recv, as pipeline parallelism calls them: a
  // ring, every rank sending 3 messages to the next on one thread while it
  // receives the previous rank's on another; each must arrive whole and in
  // the order sent (the last large enough for a library's rendezvous path).
  void point_to_point() {
    const std::string name = "send and recv (a ring, both directions at once, in order)";
    if (!TDM_STRUCT_HAS(&api_, tdm_comm_api, recv) || api_.send == nullptr || api_.recv == nullptr)
      return unsupported(
          name, "the plugin has no send and recv (optional, ABI 1.15; pipeline parallelism needs them)");
    const int next = (rank_ + 1) % world_, previous = (rank_ + world_ - 1) % world_;
    std::vector<std::vector<unsigned char>> got;
    for (size_t n : kRingCounts) got.emplace_back(n * sizeof(float), 0xA5);
    tdm_status sent = TDM_OK;
    one(
        name, true,
        [&] {
          std::thread sender([&] {
            for (size_t m = 0; m < std::size(kRingCounts) && sent == TDM_OK; ++m)
              sent = api_.send(comm_, ring_message(m).data(), kRingCounts[m], TDM_F32, next, nullptr);
          });
          tdm_status received = TDM_OK;
          for (size_t m = 0; m < std::size(kRingCounts) && received == TDM_OK; ++m)
            received = api_.recv(comm_, got[m].data(), kRingCounts[m], TDM_F32, previous, nullptr);
          sender.join();
          return sent != TDM_OK ? sent : received;
        },
        [&] { return check_ring(got); });
  }

  // ABI 1.16's optional send_start, recv_start and request_test, as the
  // pipeline's computing thread calls them: one thread starts every receive
  // of the ring, then every send, and asks request_test until each has
  // finished (within the timeout); each message whole and in the order
  // started.
  void started_transfers() {
    const std::string name = "send_start, recv_start, request_test (a ring from one thread, in order)";
    if (!TDM_STRUCT_HAS(&api_, tdm_comm_api, request_test) || api_.send_start == nullptr ||
        api_.recv_start == nullptr || api_.request_test == nullptr)
      return unsupported(
          name,
          "the plugin has no started transfers (optional, ABI 1.16; without them the host runs "
          "a plugin's send and recv on threads of their own)");
    const int next = (rank_ + 1) % world_, previous = (rank_ + world_ - 1) % world_;
    // Buffers a request may still use are never freed (a failed case leaves them to the plugin).
    auto* got = new std::vector<std::vector<unsigned char>>;
    auto* sent = new std::vector<std::vector<unsigned char>>;
    for (size_t m = 0; m < std::size(kRingCounts); ++m) {
      got->emplace_back(kRingCounts[m] * sizeof(float), 0xA5);
      sent->push_back(ring_message(m));
    }
    std::vector<tdm_comm_request*> pending;
    bool unfinished = false;
    one(
        name, true,
        [&]() -> tdm_status {
          for (size_t m = 0; m < std::size(kRingCounts); ++m) {
            tdm_comm_request* q = nullptr;
            if (tdm_status s =
                    api_.recv_start(comm_, (*got)[m].data(), kRingCounts[m], TDM_F32, previous, nullptr, &q);
                s != TDM_OK)
              return s;
            pending.push_back(q);
          }
          for (size_t m = 0; m < std::size(kRingCounts); ++m) {
            tdm_comm_request* q = nullptr;
            if (tdm_status s =
                    api_.send_start(comm_, (*sent)[m].data(), kRingCounts[m], TDM_F32, next, nullptr, &q);
                s != TDM_OK)
              return s;
            pending.push_back(q);
          }
          const auto deadline = Clock::now() + std::chrono::seconds(60);
          while (!pending.empty() && !(unfinished = Clock::now() > deadline))
            for (size_t i = 0; i < pending.size();) {
              int32_t done = 0;
              if (tdm_status s = api_.request_test(comm_, pending[i], &done); s != TDM_OK) {
                pending.erase(pending.begin() + std::ptrdiff_t(i));  // released by the plugin
                return s;
              }
              i = done ? (pending.erase(pending.begin() + std::ptrdiff_t(i)), i) : i + 1;
            }
          return TDM_OK;
        },
        [&] {
          return unfinished ? std::string("request_test still says unfinished after 60 s") : check_ring(*got);
        });
    if (pending.empty()) {
      delete got;
      delete sent;
    }
  }

  // The last rank never joins: the others must fail with TDM_TIMEOUT in time.
  // A rank whose call has not returned 2 timeouts + 5 s after it began says
  // so and ends (the plugin ignores its timeout). Nobody leaves before the
  // waiting ranks have all returned (a rank that left would close its
  // connections: another failure than the one tested): each marks its
  // return with a file in the kit's directory.
  void timeout(double timeout_seconds, const std::string& dir) {
    const std::string name = "timeout (rank " + std::to_string(world_ - 1) + " never joins an allreduce)";
    const double limit = timeout_seconds * 2 + 5;
    auto returned = [&](int r) { return fs::path(dir) / ("timeout-returned-" + std::to_string(r)); };
    auto all_returned = [&] {
      for (int r = 0; r + 1 < world_; ++r)
        if (!fs::exists(returned(r))) return false;
      return true;
    };
    const auto start = Clock::now();
    auto wait_for_the_others = [&] {
      while (!all_returned() && seconds_since(start) < limit + 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    if (rank_ == world_ - 1) {
      std::printf("PASS %s\n", name.c_str());
      std::fflush(stdout);
      wait_for_the_others();
      return;
    }
    std::printf("RUN %s\n", name.c_str());
    std::fflush(stdout);
    std::thread([name, limit] {
      std::this_thread::sleep_for(std::chrono::duration<double>(limit));
      std::printf(
          "FAIL %s: no return %.0f s after it began, with a timeout of %.1f s: the plugin does not honour "
          "tdm_comm_init_info.timeout_seconds\n",
          name.c_str(), limit, (limit - 5) / 2);
      std::fflush(stdout);
      std::_Exit(0);
    }).detach();
    std::vector<float> data(7, 1.0f);
    clear_plugin_error();
    const tdm_status s = call_plugin("allreduce", [&] {
      return api_.allreduce(comm_, data.data(), data.data(), data.size(), TDM_F32, TDM_REDUCE_SUM, nullptr);
    });
    const double took = seconds_since(start);
    std::ofstream(returned(rank_)) << took;
    const std::string said = last_plugin_error().empty() ? "no message" : "\"" + last_plugin_error() + "\"";
    if (s == TDM_TIMEOUT && took <= timeout_seconds * 2 + 1)
      std::printf("PASS %s\n", name.c_str());
    else if (s == TDM_TIMEOUT)
      std::printf("FAIL %s: TDM_TIMEOUT came after %.1f s, more than twice the %.1f s timeout\n",
                  name.c_str(), took, timeout_seconds);
    else
      std::printf(
          "FAIL %s: status %d after %.1f s (expected TDM_TIMEOUT within %.1f s); the plugin said %s\n",
          name.c_str(), static_cast<int>(s), took, timeout_seconds, said.c_str());
    std::fflush(stdout);
    wait_for_the_others();
  }

  const tdm_comm_api& api_;
  tdm_comm* comm_;
  int rank_, world_;
};

// Rank 0's comm_unique_id, through a file in `dir` (written whole: a
// temporary name, then rename); the bytes, or an error line.
bool rendezvous(const tdm_comm_api& api, int rank, const std::string& dir, double timeout_seconds,
                std::vector<unsigned char>& id) {
  const fs::path file = fs::path(dir) / "rendezvous";
  if (rank == 0) {
    size_t bytes = 4096;
    id.resize(bytes);
    clear_plugin_error();
    if (call_plugin("comm_unique_id", [&] { return api.comm_unique_id(id.data(), &bytes); }) != TDM_OK) {
      std::printf("FAIL comm_unique_id: %s\n", last_plugin_error().c_str());
      return false;
    }
    id.resize(bytes);
    const fs::path temporary = file.string() + ".tmp";
    std::ofstream(temporary, std::ios::binary)
        .write(reinterpret_cast<const char*>(id.data()), static_cast<std::streamsize>(id.size()));
    fs::rename(temporary, file);
    return true;
  }
  const auto start = Clock::now();
  while (!fs::exists(file)) {
    if (seconds_since(start) > timeout_seconds + 30) {
      std::printf("FAIL comm_create: rank 0 wrote no rendezvous id (did its comm_unique_id fail?)\n");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(file, std::ios::binary);
  id.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int run_comm_worker(const std::string& path, int rank, int world, const std::string& dir,
                    double timeout_seconds, const OpenOptions& open) {
  OpenOptions options = open;
  options.accept_comm = true;
  Outcome outcome;
  auto plugin = PluginUnderTest::load(path, outcome, options);
  if (!plugin || plugin->comm_api() == nullptr) {
    std::printf("FAIL load: %s\n", plugin ? "not a comm plugin" : outcome.message.c_str());
    return 0;
  }
  const tdm_comm_api& api = *plugin->comm_api();
  std::vector<unsigned char> id;
  if (api.comm_unique_id != nullptr && world > 1 && !rendezvous(api, rank, dir, timeout_seconds, id))
    return 0;
  tdm_comm_init_info init{};
  init.struct_size = sizeof init;
  init.rank = rank;
  init.world_size = world;
  init.local_rank = rank;
  init.unique_id = id.empty() ? nullptr : id.data();
  init.unique_id_bytes = id.size();
  init.timeout_seconds = timeout_seconds;
  init.device = -1;
  init.group = 0;
  init.point_to_point = 1;  // the point-to-point cases run on this communicator
  tdm_comm* comm = nullptr;
  std::printf("RUN comm_create\n");
  std::fflush(stdout);
  clear_plugin_error();
  const tdm_status created = call_plugin("comm_create", [&] { return api.comm_create(&init, &comm); });
  if (created != TDM_OK || comm == nullptr) {
    std::printf("FAIL comm_create: status %d: %s\n", static_cast<int>(created), last_plugin_error().c_str());
    return 0;
  }
  std::printf("PASS comm_create\n");
  Worker(api, comm, rank, world).run_all(timeout_seconds, dir);
  call_plugin("comm_destroy", [&] { api.comm_destroy(comm); });
  std::fflush(stdout);
  return 0;
}

}  // namespace tandem::conformance
