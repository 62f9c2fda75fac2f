// Helpers for tests that run `tandem train` under mpiexec and compare runs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "shell.hpp"
#include "train/checkpointing.hpp"

namespace tandem::test {

inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Largest difference between the parameters of the newest checkpoints of two runs.
inline double largest_difference(const std::string& run_a, const std::string& run_b) {
  auto a = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(run_a));
  auto b = host::checkpoint::read_safetensors(*host::train::latest_checkpoint(run_b));
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return 1e9;
  double worst = 0;
  size_t compared = 0;
  for (const auto& t : a->tensors) {
    if (t.dtype != TDM_F32 || t.name.rfind("optim.", 0) == 0 || t.name.rfind("grad_accum.", 0) == 0) continue;
    const auto* u = b->find(t.name);
    EXPECT_NE(u, nullptr) << t.name;
    if (u == nullptr) return 1e9;
    for (size_t i = 0; i < t.data.size() / 4; ++i) {
      float x, y;
      std::memcpy(&x, t.data.data() + 4 * i, 4);
      std::memcpy(&y, u->data.data() + 4 * i, 4);
      worst = std::max(worst, static_cast<double>(std::abs(x - y)));
      ++compared;
    }
  }
  EXPECT_GT(compared, 100u);
  return worst;
}

}  // namespace tandem::test
