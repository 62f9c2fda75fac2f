// A device's CPUs and thread count, applied per calling thread (see
// cpu_binding.hpp).
#include "cpu_binding.hpp"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <vector>

namespace tandem::onednn {

namespace {

uint64_t next_binding_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;  // 0 stays "none applied yet"
}

// The binding this thread applied (its id): the affinity calls happen once
// per thread. A thread that drives one device (a pipeline stage's) stays
// on its cores; one that serves a second device too (the thread that
// prepares every device's kernels, or runs micro-batches one after another
// over them) goes back where it was, with its team, and is bound no more:
// its devices' work is not concurrent on it, and it must not carry one
// device's cores into whatever it does or starts next.
thread_local uint64_t t_applied = 0;
thread_local bool t_shared = false;

// The CPUs a thread had before its first binding.
struct SavedMask {
  static constexpr int kWidth = 4096;  // CPUs a saved mask can name
  std::vector<unsigned long> words;
  size_t bytes = 0;
  bool saved = false;
};
thread_local SavedMask t_before;

void bind_team(const cpu_set_t* set, size_t bytes, int threads) {
  (void)pthread_setaffinity_np(pthread_self(), bytes, set);
  // The workers of this thread's team: new ones inherit the mask set above,
  // but libgomp keeps a host thread's workers between teams, and those made
  // while it was bound elsewhere (or not at all) would stay there.
#pragma omp parallel num_threads(threads)
  (void)pthread_setaffinity_np(pthread_self(), bytes, set);
}

}  // namespace

CpuBinding::CpuBinding(CpuList cpus, int threads)
    : id_(next_binding_id()), cpus_(std::move(cpus)), threads_(threads > 0 ? threads : 1) {
  const int width = cpus_.empty() ? 1 : cpus_.back() + 1;
  mask_bytes_ = CPU_ALLOC_SIZE(width);
  mask_.assign((mask_bytes_ + sizeof(unsigned long) - 1) / sizeof(unsigned long), 0);
  cpu_set_t* set = reinterpret_cast<cpu_set_t*>(mask_.data());
  CPU_ZERO_S(mask_bytes_, set);
  for (int c : cpus_) CPU_SET_S(c, mask_bytes_, set);
}

void CpuBinding::apply() const {
  omp_set_num_threads(threads_);
  if (t_shared || t_applied == id_) return;
  if (t_applied != 0) {  // a second device: back where the thread was
    t_shared = true;
    if (t_before.saved)
      bind_team(reinterpret_cast<const cpu_set_t*>(t_before.words.data()), t_before.bytes, threads_);
    return;
  }
  t_applied = id_;
  t_before.bytes = CPU_ALLOC_SIZE(SavedMask::kWidth);
  t_before.words.assign((t_before.bytes + sizeof(unsigned long) - 1) / sizeof(unsigned long), 0);
  t_before.saved = pthread_getaffinity_np(pthread_self(), t_before.bytes,
                                          reinterpret_cast<cpu_set_t*>(t_before.words.data())) == 0;
  bind_team(reinterpret_cast<const cpu_set_t*>(mask_.data()), mask_bytes_, threads_);
}

}  // namespace tandem::onednn
