// tcp — collectives between the processes of one machine over loopback TCP,
// as a comm plugin built out of tree against the installed SDK.
//
// Rendezvous: rank 0's comm_unique_id opens a listening socket and answers
// "tcp1 <address>:<port> <token>"; the host hands those bytes to every rank
// (--rendezvous mpi or file://…, sdk/ABI.md rule 46), and comm_create
// connects each rank to rank 0 with the token. Every collective goes through
// rank 0 (a star): it receives the ranks' buffers in rank order, reduces
// them in that order, and sends each rank its result — the same sums on
// every run, simple to read, fine for a few processes on one machine.
//
// timeout_seconds bounds each collective: a rank that does not arrive (or a
// rank 0 that does not answer) fails it with TDM_TIMEOUT naming the ranks.
// Options (--plugin-option tcp.KEY=VALUE): address (default 127.0.0.1), the
// interface rank 0 listens on.
//
// Built with TCP_COMM_BROKEN defined it is one of the conformance kit's
// planted failures: "wrong_sum" leaves the last rank out of every
// reduction, "ignore_timeout" waits for ever.
#include <tandem/half.hpp>
#include <tandem/tandem.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using tandem::Error;
using Clock = std::chrono::steady_clock;

#ifdef TCP_COMM_BROKEN
const std::string kBroken = TCP_COMM_BROKEN;
#else
const std::string kBroken;
#endif

std::string g_address = "127.0.0.1";  // from init's options
int g_listener = -1;                  // rank 0's, between comm_unique_id and comm_create
std::string g_token;

std::string system_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

size_t dtype_bytes(tdm_dtype dtype) {
  const size_t n = tandem::dtype_size(dtype);
  if (n == 0) throw tandem::Unsupported("dtype " + std::to_string(dtype) + " is not one it knows");
  return n;
}

// The deadline of one collective; none with timeout 0.
struct Deadline {
  Clock::time_point at;
  bool forever;
  explicit Deadline(double seconds)
      : at(Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))),
        forever(seconds <= 0 || kBroken == "ignore_timeout") {}
  int poll_ms() const {
    if (forever) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  }
};

// Waits until `fd` is ready for `events`; TDM_TIMEOUT past the deadline.
void wait_for(int fd, short events, const Deadline& deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, deadline.poll_ms());
    if (n > 0) return;
    if (n == 0) throw Error(TDM_TIMEOUT, what);
    if (errno != EINTR) throw Error(TDM_UNAVAILABLE, system_error("poll"));
  }
}

void send_all(int fd, const void* data, size_t bytes, const Deadline& deadline, const std::string& peer) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    wait_for(fd, POLLOUT, deadline, "" + peer + " took no data within the timeout");
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) throw Error(TDM_UNAVAILABLE, system_error("sending to " + peer));
    p += n, bytes -= static_cast<size_t>(n);
  }
}

void recv_all(int fd, void* data, size_t bytes, const Deadline& deadline, const std::string& peer) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    wait_for(fd, POLLIN, deadline, "no data from " + peer + " within the timeout");
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) throw Error(TDM_UNAVAILABLE, "" + peer + " closed its connection (did it stop?)");
    if (n < 0) throw Error(TDM_UNAVAILABLE, system_error("receiving from " + peer));
    p += n, bytes -= static_cast<size_t>(n);
  }
}

template <class T>
void reduce_into(T* acc, const T* in, size_t count, tdm_reduce_op op) {
  for (size_t i = 0; i < count; ++i) {
    if (op == TDM_REDUCE_MAX)
      acc[i] = in[i] > acc[i] ? in[i] : acc[i];
    else if (op == TDM_REDUCE_MIN)
      acc[i] = in[i] < acc[i] ? in[i] : acc[i];
    else
      acc[i] = static_cast<T>(acc[i] + in[i]);
  }
}

void reduce(void* acc, const void* in, size_t count, tdm_dtype dtype, tdm_reduce_op op) {
  switch (dtype) {
    case TDM_F32:
      return reduce_into(static_cast<float*>(acc), static_cast<const float*>(in), count, op);
    case TDM_F64:
      return reduce_into(static_cast<double*>(acc), static_cast<const double*>(in), count, op);
    case TDM_S32:
      return reduce_into(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), count, op);
    case TDM_S64:
      return reduce_into(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), count, op);
    default:
      throw tandem::Unsupported("tcp reduces f32, f64, s32 and s64 only");
  }
}

void divide(void* data, size_t count, tdm_dtype dtype, int by) {
  if (dtype == TDM_F32)
    for (size_t i = 0; i < count; ++i) static_cast<float*>(data)[i] /= static_cast<float>(by);
  else if (dtype == TDM_F64)
    for (size_t i = 0; i < count; ++i) static_cast<double*>(data)[i] /= by;
  else
    throw tandem::Unsupported("tcp averages f32 and f64 only");
}

class TcpComm final : public tandem::Communicator {
 public:
  explicit TcpComm(const tdm_comm_init_info& info)
      : rank_(info.rank), size_(info.world_size), timeout_(info.timeout_seconds) {
    if (TDM_STRUCT_HAS(&info, tdm_comm_init_info, group) && info.group != 0)
      throw Error(TDM_UNSUPPORTED, "tcp joins every rank of the run; it forms no groups");
    if (size_ == 1) return;
    if (info.unique_id == nullptr)
      throw Error(TDM_INVALID_ARGUMENT, "tcp needs the rendezvous bytes of rank 0's comm_unique_id");
    std::istringstream id(std::string(static_cast<const char*>(info.unique_id), info.unique_id_bytes));
    std::string magic, where, token;
    id >> magic >> where >> token;
    const size_t colon = where.rfind(':');
    if (magic != "tcp1" || colon == std::string::npos || token.empty())
      throw Error(TDM_INVALID_ARGUMENT, "the rendezvous bytes are not a tcp plugin's id");
    const Deadline deadline(timeout_);
    if (rank_ == 0)
      accept_peers(token, deadline);
    else
      connect_to_root(where.substr(0, colon), std::stoi(where.substr(colon + 1)), token, deadline);
  }
  ~TcpComm() override {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
  }

  void allreduce(const void* send, void* recv, size_t count, tdm_dtype dtype, tdm_reduce_op op,
                 void*) override {
    const size_t bytes = count * dtype_bytes(dtype);
    if (dtype != TDM_F32 && dtype != TDM_F64 && dtype != TDM_S32 && dtype != TDM_S64)
      throw tandem::Unsupported("tcp reduces f32, f64, s32 and s64 only");
    if (recv != send) std::memmove(recv, send, bytes);
    const Deadline deadline(timeout_);
    if (rank_ == 0) {
      std::vector<char> in(bytes);
      const int last = kBroken == "wrong_sum" ? size_ - 1 : size_;
      for (int r = 1; r < size_; ++r) {
        recv_all(peers_[r], in.data(), bytes, deadline, "rank " + std::to_string(r) + " (allreduce)");
        if (r < last) reduce(recv, in.data(), count, dtype, op == TDM_REDUCE_AVG ? TDM_REDUCE_SUM : op);
      }
      if (op == TDM_REDUCE_AVG) divide(recv, count, dtype, size_);
      for (int r = 1; r < size_; ++r) send_all(peers_[r], recv, bytes, deadline, "rank " + std::to_string(r));
    } else if (size_ > 1) {
      send_all(peers_[0], recv, bytes, deadline, "rank 0 (allreduce)");
      recv_all(peers_[0], recv, bytes, deadline, "rank 0 (allreduce)");
    }
  }

  void allgather(const void* send, void* recv, size_t send_count, tdm_dtype dtype, void*) override {
    const size_t block = send_count * dtype_bytes(dtype);
    auto* out = static_cast<char*>(recv);
    std::memmove(out + static_cast<size_t>(rank_) * block, send, block);
    const Deadline deadline(timeout_);
    if (rank_ == 0) {
      for (int r = 1; r < size_; ++r)
        recv_all(peers_[r], out + static_cast<size_t>(r) * block, block, deadline,
                 "rank " + std::to_string(r) + " (allgather)");
      for (int r = 1; r < size_; ++r)
        send_all(peers_[r], out, block * static_cast<size_t>(size_), deadline, "rank " + std::to_string(r));
    } else if (size_ > 1) {
      send_all(peers_[0], out + static_cast<size_t>(rank_) * block, block, deadline, "rank 0 (allgather)");
      recv_all(peers_[0], out, block * static_cast<size_t>(size_), deadline, "rank 0 (allgather)");
    }
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, tdm_dtype dtype, tdm_reduce_op op,
                      void* stream) override {
    std::vector<char> whole(recv_count * dtype_bytes(dtype) * static_cast<size_t>(size_));
    allreduce(send, whole.data(), recv_count * static_cast<size_t>(size_), dtype, op, stream);
    const size_t block = recv_count * dtype_bytes(dtype);
    std::memcpy(recv, whole.data() + static_cast<size_t>(rank_) * block, block);
  }

  void broadcast(void* buffer, size_t count, tdm_dtype dtype, int32_t root, void*) override {
    if (root < 0 || root >= size_)
      throw Error(TDM_INVALID_ARGUMENT, "broadcast root " + std::to_string(root) + " is not a rank");
    const size_t bytes = count * dtype_bytes(dtype);
    const Deadline deadline(timeout_);
    if (rank_ == 0) {
      if (root != 0)
        recv_all(peers_[root], buffer, bytes, deadline, "rank " + std::to_string(root) + " (broadcast root)");
      for (int r = 1; r < size_; ++r)
        if (r != root) send_all(peers_[r], buffer, bytes, deadline, "rank " + std::to_string(r));
    } else if (rank_ == root) {
      send_all(peers_[0], buffer, bytes, deadline, "rank 0 (broadcast)");
    } else {
      recv_all(peers_[0], buffer, bytes, deadline, "rank 0 (broadcast)");
    }
  }

  // --plugin-option tcp.address=… (the interface rank 0 listens on).
  static void init(const tandem::Config& options) {
    for (const auto& [key, value] : options.values())
      if (key != "address")
        throw Error(TDM_INVALID_ARGUMENT, "unknown option '" + key + "' (expected: address)");
    g_address = options.get("address").value_or("127.0.0.1");
  }

  void barrier() override {
    int32_t one = 1;
    allreduce(&one, &one, 1, TDM_S32, TDM_REDUCE_SUM, nullptr);
  }

 private:
  void accept_peers(const std::string& token, const Deadline& deadline) {
    if (g_listener < 0 || token != g_token)
      throw Error(TDM_INVALID_ARGUMENT,
                  "rank 0 creates its communicator with the id its own comm_unique_id gave");
    peers_.assign(static_cast<size_t>(size_), -1);
    for (int joined = 1; joined < size_;) {
      std::string missing;
      for (int r = 1; r < size_; ++r)
        if (peers_[static_cast<size_t>(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      wait_for(g_listener, POLLIN, deadline, "rank(s) " + missing + " did not connect within the timeout");
      const int fd = ::accept(g_listener, nullptr, nullptr);
      if (fd < 0) continue;
      char hello[80] = {};
      recv_all(fd, hello, sizeof hello, deadline, "a connecting rank");
      int rank = -1;
      char peer_token[64] = {};
      if (std::sscanf(hello, "%d %63s", &rank, peer_token) != 2 || token != peer_token || rank < 1 ||
          rank >= size_ || peers_[static_cast<size_t>(rank)] >= 0) {
        ::close(fd);  // not one of ours
        continue;
      }
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      peers_[static_cast<size_t>(rank)] = fd;
      ++joined;
    }
    ::close(g_listener);
    g_listener = -1;
  }

  void connect_to_root(const std::string& address, int port, const std::string& token,
                       const Deadline& deadline) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1)
      throw Error(TDM_INVALID_ARGUMENT, "'" + address + "' is not an IPv4 address");
    peers_.assign(1, -1);
    for (;;) {  // rank 0 may not listen yet when the id came through a file
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) throw Error(TDM_UNAVAILABLE, system_error("socket"));
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
        peers_[0] = fd;
        break;
      }
      ::close(fd);
      if (!deadline.forever && Clock::now() >= deadline.at)
        throw Error(TDM_TIMEOUT, "rank " + std::to_string(rank_) + " could not reach rank 0 at " + address +
                                     ":" + std::to_string(port) + " within the timeout");
      ::usleep(20000);
    }
    const int on = 1;
    ::setsockopt(peers_[0], IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    char hello[80] = {};
    std::snprintf(hello, sizeof hello, "%d %s", rank_, token.c_str());
    send_all(peers_[0], hello, sizeof hello, deadline, "rank 0 (joining)");
  }

  int rank_, size_;
  double timeout_;
  std::vector<int> peers_;  // rank 0: one socket per rank (index 0 unused); others: rank 0's
};

std::string random_token() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[12] = {};
  random.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  std::string token;
  for (unsigned char b : bytes) token += "0123456789abcdef"[b >> 4], token += "0123456789abcdef"[b & 15];
  return token;
}

tdm_status unique_id(void* buffer, size_t* bytes) {
  return tandem::guard([&] {
    if (g_listener >= 0) ::close(g_listener);
    g_listener = ::socket(AF_INET, SOCK_STREAM, 0);
    if (g_listener < 0) throw Error(TDM_UNAVAILABLE, system_error("socket"));
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = 0;  // any free port
    if (::inet_pton(AF_INET, g_address.c_str(), &at.sin_addr) != 1)
      throw Error(TDM_INVALID_ARGUMENT, "address '" + g_address + "' is not an IPv4 address");
    socklen_t size = sizeof at;
    if (::bind(g_listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
        ::listen(g_listener, 64) != 0 ||
        ::getsockname(g_listener, reinterpret_cast<sockaddr*>(&at), &size) != 0)
      throw Error(TDM_UNAVAILABLE, system_error("listening on " + g_address));
    g_token = random_token();
    const std::string id = "tcp1 " + g_address + ":" + std::to_string(ntohs(at.sin_port)) + " " + g_token;
    if (*bytes < id.size()) throw Error(TDM_INVALID_ARGUMENT, "the id buffer is too small");
    std::memcpy(buffer, id.data(), id.size());
    *bytes = id.size();
  });
}

}  // namespace

extern "C" TDM_EXPORT const tdm_plugin* tdm_plugin_entry(const tdm_host_api* host, uint32_t major,
                                                         uint32_t minor) {
  try {
    return tandem::comm_entry<TcpComm>(
        host, major, minor,
        {kBroken.empty() ? "tcp" : "tcp_" + kBroken,
         "0.1.0",
         "Collectives between the processes of one machine over loopback TCP (an SDK example)",
         {}},
        unique_id);
  } catch (...) {  // building the name allocates; nothing may leave a C entry point
    return nullptr;
  }
}
