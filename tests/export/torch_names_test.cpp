// Tandem's tensor names and PyTorch's state_dict names for the same layers.
#include <gtest/gtest.h>

#include "checkpoint/torch_names.hpp"

namespace tandem::host::checkpoint {
namespace {

TEST(TorchNames, OnlyTheNormsParametersAreRenamed) {
  EXPECT_EQ(torch_name("fc1.weight"), "fc1.weight");
  EXPECT_EQ(torch_name("fc1.bias"), "fc1.bias");
  EXPECT_EQ(torch_name("conv1.weight"), "conv1.weight");
  EXPECT_EQ(torch_name("bn1.gamma"), "bn1.weight");
  EXPECT_EQ(torch_name("bn1.beta"), "bn1.bias");
  EXPECT_EQ(torch_name("bn1.running_mean"), "bn1.running_mean");
  EXPECT_EQ(torch_name("blocks.3.norm.gamma"), "blocks.3.norm.weight");
  EXPECT_EQ(torch_name("blocks.3.attn.q.weight"), "blocks.3.attn.q.weight");
  EXPECT_EQ(torch_name("gamma"), "gamma") << "a bare name is no norm's";
}

}  // namespace
}  // namespace tandem::host::checkpoint
