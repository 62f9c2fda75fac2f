// Where each tensor of a Hugging Face model sits among Tandem's, one table
// per family read in both directions: --init-from and --weights read a
// model directory by it (hf_weights.cpp), `export --format hf` writes one
// (export/hf_export.cpp). Hugging Face names are taken without the model's
// prefix ("transformer." for GPT-2, "model." for the others; the head has
// none).
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "hub/hf_config.hpp"

namespace tandem::host::hub {

// How a Hugging Face tensor's values sit in Tandem's.
enum class Layout {
  same,
  transposed,  // GPT-2's Conv1D [in, out] <-> a linear's [out, in]
  packed_qkv,  // GPT-2's c_attn: q, k and v side by side (a Conv1D's columns, or a bias)
  skipped,     // a buffer the layers recompute (causal masks, rope frequencies): read past
};

struct NameRule {
  std::regex hf;            // matches a Hugging Face name
  std::string tandem_from;  // its Tandem name, a std::regex_replace format ('%': q, k or v when packed)
  std::regex tandem;        // matches a Tandem name (packed: q, k or v); never, for skipped buffers
  std::string hf_from;      // its Hugging Face name, a format
  Layout layout;
};

const std::vector<NameRule>& name_rules(Family family);

// The rule a Hugging Face name (without the prefix) or a Tandem name
// matches; nullptr for none.
const NameRule* rule_for_hf(Family family, const std::string& name);
const NameRule* rule_for_tandem(Family family, const std::string& name);

// The prefix of the family's Hugging Face names, and a name with it.
std::string hf_prefix(Family family);
std::string with_hf_prefix(Family family, const std::string& name);

// An f32 tensor of `values`.
checkpoint::TensorRecord f32_record(std::string name, std::vector<int64_t> shape,
                                    const std::vector<float>& values);
// Columns [first, first + count) of a row-major [rows, cols] matrix, as [count, rows].
std::vector<float> transposed_columns(const float* m, int64_t rows, int64_t cols, int64_t first,
                                      int64_t count);

}  // namespace tandem::host::hub
