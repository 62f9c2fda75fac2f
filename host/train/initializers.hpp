// Seeded host-side initialisation of parameters and state.
//
// Values depend only on (seed, tensor name), never on creation order or
// thread count, so the same model file and seed give the same start on every
// backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowering/model_graph.hpp"

namespace tandem::host::train {

// `count` values for a tensor named `name` with initializer `init`:
//   kaiming          N(0, 2/fan_in)            (He, for ReLU networks)
//   kaiming_uniform  U(±sqrt(6/fan_in))
//   xavier           N(0, 2/(fan_in+fan_out))  (Glorot)
//   xavier_uniform   U(±sqrt(6/(fan_in+fan_out)))
//   normal           N(0, std^2)
//   zeros, ones
std::vector<float> initial_values(const lowering::Initializer& init, const std::string& name, int64_t count,
                                  uint64_t seed);

}  // namespace tandem::host::train
