#include "data/loader.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "data/counter_rng.hpp"
#include "data/split.hpp"

namespace tandem::host::data {

DataLoader::DataLoader(const Dataset& data, LoaderOptions options)
    : data_(data), options_(std::move(options)) {
  options_.threads = std::max(1, options_.threads);
  options_.prefetch = std::max(1, options_.prefetch);
  options_.shard_count = std::max(1, options_.shard_count);
  const int64_t global = options_.batch_size * options_.shard_count;
  batches_ = options_.drop_last ? data_.size() / global : (data_.size() + global - 1) / global;
}

DataLoader::~DataLoader() {
  stop_workers();
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::lock_guard lock(mutex_);
  stopping_ = false;
  done_.clear();
}

void DataLoader::start_epoch(uint64_t epoch, int64_t first_batch) {
  stop_workers();
  epoch_ = epoch;
  if (options_.shuffle) {
    order_ = seeded_permutation(data_.size(), options_.seed, kShuffleStream, epoch);
  } else {
    order_.resize(static_cast<size_t>(data_.size()));
    std::iota(order_.begin(), order_.end(), 0);
  }
  next_ = std::clamp<int64_t>(first_batch, 0, batches_);
  const int64_t first = next_;
  for (int w = 0; w < options_.threads; ++w) workers_.emplace_back([this, w, first] { work(w, first); });
}

// Token data: sample k of the epoch is a window of context + 1 tokens —
// inputs the first context, labels the last context. Training windows start
// at a point drawn from (seed, epoch, k), so an epoch is reproducible and a
// resumed run sees the same windows; evaluation windows are consecutive.
std::shared_ptr<Batch> DataLoader::assemble_windows(int64_t index) const {
  const int64_t global = options_.batch_size * options_.shard_count, T = data_.context;
  const int64_t begin = std::min(data_.size(), index * global + options_.shard_rank * options_.batch_size);
  const int64_t end = std::min(data_.size(), begin + options_.batch_size);
  const TokenStream& stream = *data_.tokens;
  auto batch = std::make_shared<Batch>();
  batch->index = index;
  batch->size = end - begin;
  batch->tokens.resize(static_cast<size_t>(batch->size * T));
  batch->labels.resize(static_cast<size_t>(batch->size * T));
  const uint64_t starts = uint64_t(stream.size() - T);  // windows of T + 1 tokens
  for (int64_t i = 0; i < batch->size; ++i) {
    const uint64_t k = uint64_t(begin + i);
    const int64_t start = data_.random_windows
                              ? int64_t(random_below(options_.seed, kWindowStream,
                                                     epoch_ * uint64_t(data_.windows) + k, starts))
                              : int64_t(k) * T;
    for (int64_t t = 0; t < T; ++t) {
      batch->tokens[size_t(i * T + t)] = int32_t(stream.at(start + t));
      batch->labels[size_t(i * T + t)] = int32_t(stream.at(start + t + 1));
    }
  }
  return batch;
}

std::shared_ptr<Batch> DataLoader::assemble(int64_t index, std::vector<float>& scratch) const {
  if (data_.tokens) return assemble_windows(index);
  const int64_t global = options_.batch_size * options_.shard_count;
  const int64_t begin = std::min(data_.size(), index * global + options_.shard_rank * options_.batch_size);
  const int64_t end = std::min(data_.size(), begin + options_.batch_size);
  auto batch = std::make_shared<Batch>();
  batch->index = index;
  batch->size = end - begin;
  const int64_t numel = data_.sample_numel();
  batch->features.resize(static_cast<size_t>(batch->size * numel));
  batch->labels.resize(static_cast<size_t>(batch->size));
  for (int64_t i = 0; i < batch->size; ++i) {
    const int64_t sample = order_[static_cast<size_t>(begin + i)];
    float* dst = batch->features.data() + i * numel;
    data_.copy_sample(sample, dst);  // widened from the stored dtype here, per batch
    apply_transforms(options_.transforms, data_.sample_shape,
                     std::span<float>(dst, static_cast<size_t>(numel)), options_.augment, options_.seed,
                     epoch_, static_cast<uint64_t>(sample), scratch);
    batch->labels[static_cast<size_t>(i)] = data_.labels[static_cast<size_t>(sample)];
  }
  return batch;
}

void DataLoader::work(int worker, int64_t first) {
  std::vector<float> scratch;
  // Worker w produces batches first+w, first+w+T, ... each no further than
  // `prefetch` ahead of the consumer.
  for (int64_t index = first + worker; index < batches_; index += options_.threads) {
    {
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] { return stopping_ || index < next_ + options_.prefetch; });
      if (stopping_) return;
    }
    auto batch = assemble(index, scratch);
    {
      std::lock_guard lock(mutex_);
      done_.emplace(index, std::move(batch));
    }
    ready_.notify_all();
  }
}

std::shared_ptr<const Batch> DataLoader::next() {
  std::unique_lock lock(mutex_);
  if (next_ >= batches_) return nullptr;
  auto it = done_.find(next_);
  if (it == done_.end()) {
    const auto start = std::chrono::steady_clock::now();
    ready_.wait(lock, [&] { return (it = done_.find(next_)) != done_.end(); });
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::shared_ptr<const Batch> batch = std::move(it->second);
  done_.erase(it);
  ++next_;
  lock.unlock();
  space_.notify_all();
  return batch;
}

}  // namespace tandem::host::data
