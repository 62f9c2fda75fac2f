// MPI comm plugin — MPI initialisation, shutdown and the 16-bit float ops.
#include "runtime.hpp"

#include <thread>

#include "half.hpp"

namespace tandem::mpi {

Runtime& runtime() {
  static Runtime r;
  return r;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw Error(TDM_INTERNAL, what + " failed: " + mpi_error_text(rc));
}

namespace {

// User MPI_Op bodies: the datatype handle says f16 or bf16.
template <Combine C>
void combine_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  if (*type == runtime().bf16)
    combine16<bf16_to_f32, f32_to_bf16>(a, b, *len, C);
  else
    combine16<f16_to_f32, f32_to_f16>(a, b, *len, C);
}

}  // namespace

void runtime_init() {
  Runtime& r = runtime();
  if (r.ready) return;
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised)
    throw Error(TDM_UNAVAILABLE, "MPI was already finalised in this process; it cannot be restarted");
  if (!initialised) {
    // MULTIPLE: the executor may drive two communicators from two threads.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &r.thread_level), "MPI_Init_thread");
    r.we_initialised = true;
    // Errors are values in this process: no MPI call may abort it behind our back.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    MPI_Query_thread(&r.thread_level);
  }
  if (r.thread_level < MPI_THREAD_MULTIPLE)
    Host::log(TDM_LOG_INFO,
              "MPI granted thread level " + std::to_string(r.thread_level) +
                  " (< MPI_THREAD_MULTIPLE): collectives of different communicators are serialised");
  check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &r.f16), "MPI_Type_contiguous(f16)");
  check_mpi(MPI_Type_commit(&r.f16), "MPI_Type_commit(f16)");
  check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &r.bf16), "MPI_Type_contiguous(bf16)");
  check_mpi(MPI_Type_commit(&r.bf16), "MPI_Type_commit(bf16)");
  check_mpi(MPI_Op_create(&combine_op<Combine::Sum>, 1, &r.sum16), "MPI_Op_create(sum16)");
  check_mpi(MPI_Op_create(&combine_op<Combine::Max>, 1, &r.max16), "MPI_Op_create(max16)");
  check_mpi(MPI_Op_create(&combine_op<Combine::Min>, 1, &r.min16), "MPI_Op_create(min16)");
  r.ready = true;
}

void runtime_shutdown() noexcept {
  Runtime& r = runtime();
  if (!r.ready) return;
  r.ready = false;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  if (r.timed_out) {
    // MPI_Finalize synchronises with every process of the job; after a peer
    // died it would hang. The host exits with an error; mpirun then ends the job.
    Host::log(TDM_LOG_WARNING, "a collective timed out: leaving MPI without MPI_Finalize");
    return;
  }
  MPI_Op_free(&r.sum16);
  MPI_Op_free(&r.max16);
  MPI_Op_free(&r.min16);
  MPI_Type_free(&r.f16);
  MPI_Type_free(&r.bf16);
  if (r.we_initialised) MPI_Finalize();
}

std::pair<std::string, std::string> library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);  // allowed before MPI_Init
  std::string s(text, static_cast<size_t>(length));
  // "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, ..."
  const std::string prefix = "Open MPI v";
  if (s.rfind(prefix, 0) == 0) {
    const size_t end = s.find_first_of(", \n", prefix.size());
    return {"Open MPI", s.substr(prefix.size(), end - prefix.size())};
  }
  const size_t end = s.find_first_of(",\n");
  return {"MPI", s.substr(0, end)};
}

std::unique_lock<std::mutex> serial() {
  Runtime& r = runtime();
  std::unique_lock<std::mutex> lock(r.serial, std::defer_lock);
  if (r.thread_level < MPI_THREAD_MULTIPLE) lock.lock();
  return lock;
}

void pause_between_polls(std::chrono::steady_clock::duration waited) {
  using namespace std::chrono_literals;
  if (waited < 5ms)
    std::this_thread::yield();
  else if (waited < 1s)
    std::this_thread::sleep_for(50us);
  else
    std::this_thread::sleep_for(1ms);
}

}  // namespace tandem::mpi
