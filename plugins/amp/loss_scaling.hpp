// The loss-scaling part of the graph: the loss gradient seed multiplied by
// the state "amp.loss_scale", parameter gradients computed from inputs
// multiplied by "amp.inv_scale" (so every gradient value autodiff named
// arrives unscaled, in f32), and one overflow check per gradient.
#pragma once

#include <string>
#include <vector>

#include "graph_edit.hpp"

namespace amp {

inline constexpr const char* kScaleState = "amp.loss_scale";
inline constexpr const char* kInverseState = "amp.inv_scale";

// One parameter gradient and the f32 state scalar that sums it (a
// non-finite sum means an inf or NaN somewhere in the gradient).
struct OverflowCheck {
  std::string state;     // "amp.overflow.<gradient>"
  std::string gradient;  // "fc1.weight.grad"
  std::string layer;     // "fc1"
};

std::vector<OverflowCheck> insert_loss_scaling(GraphEdit& graph, double initial_scale);

}  // namespace amp
