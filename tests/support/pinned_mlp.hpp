// A three-layer MLP with fc1 and fc3 pinned to reference:0 and fc2 on the
// run's device: two boundaries each way, for placement and copy tests.
#pragma once

namespace tandem::test {

inline constexpr const char* kPinnedMlp = R"([model]
input = [8]
classes = 4
[[layers]]
name = "fc1"
op = "linear"
out_features = 16
activation = "relu"
device = "reference"
[[layers]]
name = "fc2"
op = "linear"
out_features = 16
activation = "relu"
[[layers]]
name = "fc3"
op = "linear"
out_features = 4
device = "reference:0"
[train]
momentum = 0.9
)";

}  // namespace tandem::test
