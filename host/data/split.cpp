#include "data/split.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/counter_rng.hpp"

namespace tandem::host::data {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream, uint64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  const uint64_t epoch_seed = mix64(seed ^ (epoch * 0xD1B54A32D192ED03ull));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(
        random_below(epoch_seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i + 1)));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

std::pair<Dataset, Dataset> split_validation(const Dataset& all, double fraction, uint64_t seed) {
  const auto held =
      static_cast<int64_t>(std::llround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(all.size())));
  std::vector<int64_t> order = seeded_permutation(all.size(), seed, kSplitStream, 0);
  std::vector<int64_t> val(order.begin(), order.begin() + held);
  std::vector<int64_t> train(order.begin() + held, order.end());
  std::sort(val.begin(), val.end());
  std::sort(train.begin(), train.end());
  return {select(all, train, all.source + " (train part)"),
          select(all, val, all.source + " (validation part)")};
}

}  // namespace tandem::host::data
