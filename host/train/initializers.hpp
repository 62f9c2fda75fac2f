// Seeded host-side initialisation of parameters and state.
//
// Values depend only on (seed, tensor name), never on creation order or
// thread count, so the same model file and seed give the same start on every
// backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.hpp"
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

// Every parameter and state tensor of `model` written with its initial
// values: with its initializer (this rank's slice of a tensor split by
// tensor parallelism, so every rank starts from the one whole tensor), else
// filled with its initial value. What train and bench both start from.
// A tensor-parallel rank starts from its slice of the values the whole
// tensor would start with, a ZeRO stage-3 rank (`zero_rank` of the data
// ranks) from its shard of them: every run starts from the same model.
// States that start as a copy of another value (Value::copy_of, a feature's
// graph->state_add_copy) are copied last, from their sources' initial values.
Result<void> initialise_tensors(const lowering::ModelGraph& model, exec::Executor& executor, uint64_t seed,
                                int zero_rank = 0);

// Sets each of `states` (values with Value::copy_of) to its source's
// contents now: after initialisation, and after weights were loaded into
// the sources (--init-from, or a checkpoint that predates the state).
Result<void> copy_states_from_sources(const Graph& graph, exec::Executor& executor,
                                      const std::vector<const Value*>& states);

}  // namespace tandem::host::train
