// Data parallelism: which gradients are all-reduced together, and when.
//
// Gradients become final one after another during backward (the last layer's
// first). Waiting for all of them before communicating leaves the network
// idle during backward and the CPU idle during the all-reduce; sending each
// alone pays the per-message latency hundreds of times. As in PyTorch's DDP,
// gradients are grouped in the order they become final into buckets of about
// `bucket_bytes`, and a bucket is all-reduced as soon as its last gradient is
// final, while backward continues with the earlier layers.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "graph/graph.hpp"

namespace tandem::host::train {

struct GradientBucket {
  std::vector<ValueId> gradients;  // in the order they become final
  size_t ready_at = 0;             // schedule position after which every gradient is final
  size_t bytes = 0;
  tdm_dtype dtype = TDM_F32;  // one dtype per bucket: it is reduced as one buffer
};

// One bucket's all-reduce as the host saw it, for --profile (either path:
// overlapped_allreduce.hpp, streamed_allreduce.hpp).
struct AllReduceSpan {
  size_t bucket = 0;
  size_t bytes = 0;
  std::chrono::steady_clock::time_point begin, end;
};

// Groups `gradients` (values of `graph`) for nodes [0, end): a gradient is
// final once every node before `end` that writes or reads it has run — a
// reader too, because the all-reduce overwrites it in place. Buckets close
// when they reach `bucket_bytes` (0: one gradient per bucket) or the dtype
// changes; they are returned in the order they become ready.
std::vector<GradientBucket> plan_gradient_buckets(const Graph& graph, const std::vector<ValueId>& gradients,
                                                  size_t end, size_t bucket_bytes);

}  // namespace tandem::host::train
