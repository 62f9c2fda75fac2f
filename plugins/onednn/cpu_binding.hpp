// A device's CPUs and thread count, applied to the thread that prepares or
// launches its kernels. Only with several devices ("plugins.onednn.devices"
// N > 1); one device binds nothing.
//
// Why per calling thread: OpenMP's nthreads ICV belongs to the host thread
// that sets it, and a team's worker threads run where that host thread put
// them, so two host threads driving onednn:0 and onednn:1 each get their
// device's team on their device's cores without touching the other.
// oneDNN creates a primitive for the thread count current at its creation
// and runs it with that many threads, and some own kernels size their
// workspace by it; so prepare applies the binding as well as launch.
#ifndef TANDEM_ONEDNN_CPU_BINDING_HPP
#define TANDEM_ONEDNN_CPU_BINDING_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu_groups.hpp"
#include "tandem/tandem.hpp"

namespace tandem::onednn {

class CpuBinding {
 public:
  CpuBinding(CpuList cpus, int threads);
  const CpuList& cpus() const noexcept { return cpus_; }
  int threads() const noexcept { return threads_; }

  // omp_set_num_threads(threads) on the calling thread, every time (cheap:
  // no system call, and whatever set it in between is overridden). Then,
  // the first time a thread applies a binding: it and its OpenMP team's
  // workers bound to `cpus` (the workers a team made earlier kept the mask
  // they were made with). The first time it applies another device's: it
  // and its team go back to the CPUs it had before, and it is bound no
  // more (a thread serving several devices runs their work one after
  // another). A failing affinity call leaves the thread where it was:
  // binding is a placement hint, never an error of the kernel.
  void apply() const;

 private:
  uint64_t id_;  // unique in the process, never reused: the per-thread cache key
  CpuList cpus_;
  int threads_;
  std::vector<unsigned long> mask_;  // a CPU_ALLOC-style cpu_set_t of mask_bytes_
  size_t mask_bytes_ = 0;
};

// A kernel of a bound device: applies the binding, then launches the
// kernel prepare made. Shares the binding, so a kernel released after its
// device still launches nothing wrong.
class BoundKernel final : public Kernel {
 public:
  BoundKernel(std::unique_ptr<Kernel> kernel, std::shared_ptr<const CpuBinding> binding)
      : kernel_(std::move(kernel)), binding_(std::move(binding)) {}
  void launch(Stream& stream, void* const* inputs, void* const* outputs, void* workspace) override {
    binding_->apply();
    kernel_->launch(stream, inputs, outputs, workspace);
  }
  const char* describe() const noexcept override { return kernel_->describe(); }

 private:
  std::unique_ptr<Kernel> kernel_;
  std::shared_ptr<const CpuBinding> binding_;
};

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_CPU_BINDING_HPP
