// The data loader: batches of a data set, assembled by worker threads into a
// bounded prefetch queue ahead of the training step.
//
// Determinism: the epoch order and every augmentation are functions of
// (seed, epoch, sample), and batches are handed out strictly in order, so the
// stream of batches is identical for any thread count, and a run resumed at
// (epoch, batch) sees exactly the batches it would have seen.
//
// Sharding for data parallelism: with shard_count ranks, global batch k is
// order[k*B*R, (k+1)*B*R) and rank r takes its r-th slice of B samples, so
// the union over ranks is the single-process batch of size B*R.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.hpp"
#include "data/transforms.hpp"

namespace tandem::host::data {

struct LoaderOptions {
  int64_t batch_size = 32;  // per rank
  bool shuffle = true;
  bool drop_last = false;
  bool augment = false;  // apply the augmentations in `transforms` (training only)
  uint64_t seed = 0;
  int threads = 1;   // loader threads
  int prefetch = 4;  // batches prepared ahead of the consumer
  Transforms transforms;
  int shard_rank = 0;
  int shard_count = 1;
};

struct Batch {
  int64_t index = 0;            // position within the epoch
  int64_t size = 0;             // samples (the last batch may be short unless drop_last)
  std::vector<float> features;  // size * sample_numel
  std::vector<int32_t> labels;  // size, or size * context for token data
  std::vector<int32_t> tokens;  // token data: size * context input ids

  // The model's input: token ids (s32) for token data, else the features (f32).
  const void* input_data() const noexcept {
    return tokens.empty() ? static_cast<const void*>(features.data()) : tokens.data();
  }
  size_t input_bytes() const noexcept {
    return tokens.empty() ? features.size() * sizeof(float) : tokens.size() * sizeof(int32_t);
  }
};

class DataLoader {
 public:
  DataLoader(const Dataset& data, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const noexcept { return batches_; }
  const Dataset& dataset() const noexcept { return data_; }

  // Starts (or restarts) producing epoch `epoch` from batch `first_batch`.
  void start_epoch(uint64_t epoch, int64_t first_batch = 0);
  // The next batch of the current epoch, or nullptr after its last. Time spent
  // blocked here is counted in wait_seconds().
  std::shared_ptr<const Batch> next();

  double wait_seconds() const noexcept { return wait_seconds_; }
  void reset_wait() noexcept { wait_seconds_ = 0; }

 private:
  void stop_workers();
  void work(int worker, int64_t first);
  std::shared_ptr<Batch> assemble_windows(int64_t index) const;
  std::shared_ptr<Batch> assemble(int64_t index, std::vector<float>& scratch) const;

  const Dataset& data_;
  LoaderOptions options_;
  int64_t batches_ = 0;

  uint64_t epoch_ = 0;
  std::vector<int64_t> order_;
  int64_t next_ = 0;  // next batch index to hand out

  std::mutex mutex_;
  std::condition_variable ready_;  // a batch was produced
  std::condition_variable space_;  // the consumer took one, or stop
  std::map<int64_t, std::shared_ptr<Batch>> done_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  double wait_seconds_ = 0;
};

}  // namespace tandem::host::data
