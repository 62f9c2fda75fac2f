// `--memory-budget onednn:0=2GiB,cuda:0=6GiB`: bytes each device may hold.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <boost/program_options.hpp>

#include "model/model_spec.hpp"
#include "plugin/registry.hpp"
#include "train/trainer.hpp"
#include "util/result.hpp"

namespace tandem::cli {

// Devices as --device names them ("cpu", "onednn", "reference:0"), resolved
// to device ids; sizes with B, KiB, MiB or GiB (or a plain byte count).
host::Result<std::map<std::string, uint64_t>> parse_memory_budget(const std::string& text,
                                                                  const host::PluginRegistry& registry);

// `--device onednn:0,reference:0`: the first device is the run's own (the
// default of unpinned layers), the others are more devices it may use.
std::string primary_device(const std::string& device_list);

// --stream-params, --no-stream and --stream-depth, as train, plan and bench
// take them.
void add_streaming_options(boost::program_options::options_description& options);

// --stream-params (every layer), --no-stream (none) or neither (Auto: what
// makes the run fit); both is a usage error.
host::Result<host::program::StreamChoice> stream_choice(const boost::program_options::variables_map& vm);

// --stream-depth, checked (1 to 64).
host::Result<size_t> stream_depth(const boost::program_options::variables_map& vm);

// The placement options train and plan share: --memory-budget, the devices
// after the first of --device, --threads (which the cost model's cache is
// keyed by), the streaming choice and --stream-depth into `train`, --placement into the spec. An error is a
// usage error.
host::Result<void> apply_placement_options(const boost::program_options::variables_map& vm,
                                           const host::PluginRegistry& registry, host::model::ModelSpec& spec,
                                           host::train::TrainOptions& train);

}  // namespace tandem::cli
