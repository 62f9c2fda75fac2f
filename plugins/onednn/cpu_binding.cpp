// A device's CPUs and thread count, applied per calling thread (see
// cpu_binding.hpp).
#include "cpu_binding.hpp"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>

namespace tandem::onednn {

namespace {

uint64_t next_binding_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;  // 0 stays "none applied yet"
}

// The binding this thread applied last (its id): the affinity calls happen
// only when it changes. A thread driving one device pays them once.
thread_local uint64_t t_applied = 0;

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
  if (t_applied == id_) return;
  t_applied = id_;
  const cpu_set_t* set = reinterpret_cast<const cpu_set_t*>(mask_.data());
  (void)pthread_setaffinity_np(pthread_self(), mask_bytes_, set);
  // The workers of this thread's team: new ones inherit the mask set above,
  // but libgomp keeps a host thread's workers between teams, and those made
  // while it was bound elsewhere (or not at all) would stay there.
#pragma omp parallel num_threads(threads_)
  (void)pthread_setaffinity_np(pthread_self(), mask_bytes_, set);
}

}  // namespace tandem::onednn
