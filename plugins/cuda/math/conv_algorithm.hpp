// CUDA backend — which cuDNN convolution algorithm prepare takes, as plain
// C++ over what cuDNN's heuristic answered (ops/conv_graph.cpp asks it, or
// ops/conv2d.cpp with cuda.conv_api=legacy), so the rule is tested on the
// CPU (tests/cuda/test_conv_algorithm.cpp).
//
// Two plugin options decide (sdk/ABI.md rule 40, `--plugin-option cuda.KEY=VALUE`):
//  - cuda.deterministic = prefer (default) | require | any. cuDNN's
//    backward-filter and some backward-data algorithms add with atomics,
//    so their results move in the last bits from run to run. `prefer` takes
//    the heuristic's first deterministic algorithm and a non-deterministic
//    one only where none fits; `require` declines the convolution instead
//    (the planner then places it on another device, e.g. the CPU, which is
//    bit-reproducible); `any` takes the heuristic's first.
//  - cuda.conv_workspace_limit = bytes (e.g. 512MiB; default 256MiB): an
//    algorithm whose workspace is larger is never taken. The workspace is
//    planned memory (prepare reports it), so the limit bounds what one
//    convolution adds to the plan; where nothing fits, the convolution is
//    declined with the smallest workspace that would.
#ifndef TANDEM_CUDA_MATH_CONV_ALGORITHM_HPP
#define TANDEM_CUDA_MATH_CONV_ALGORITHM_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/byte_size.hpp"

namespace tandem::cuda::math {

enum class Determinism { prefer, require, any };

struct ConvAlgorithmOptions {
  Determinism determinism = Determinism::prefer;
  size_t workspace_limit = size_t(256) << 20;
};

// One answer of the heuristic, in its order (fastest expected first).
struct ConvAlgorithmCandidate {
  int algo = 0;
  bool usable = false;  // cuDNN's status was success and its workspace size is known
  bool deterministic = false;
  size_t workspace = 0;
};

// The candidate taken (index into the list), or -1 and why none was.
struct ConvAlgorithmPick {
  int index = -1;
  std::string why_none;
};

inline std::string mib_text(size_t bytes) {
  const double mib = double(bytes) / double(1 << 20);
  std::string s = std::to_string(mib);
  s = s.substr(0, s.find('.') + 2);
  return s + " MiB";
}

inline ConvAlgorithmPick pick_conv_algorithm(const std::vector<ConvAlgorithmCandidate>& candidates,
                                             const ConvAlgorithmOptions& o) {
  const auto first = [&](bool deterministic_only) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      const ConvAlgorithmCandidate& c = candidates[i];
      if (c.usable && c.workspace <= o.workspace_limit && (!deterministic_only || c.deterministic))
        return int(i);
    }
    return -1;
  };
  ConvAlgorithmPick pick;
  pick.index = first(o.determinism != Determinism::any);
  if (pick.index < 0 && o.determinism == Determinism::prefer) pick.index = first(false);
  if (pick.index >= 0) return pick;

  // Why not: the smallest workspace among those the rule would otherwise take.
  const bool need_deterministic = o.determinism == Determinism::require;
  std::optional<size_t> smallest;
  bool any_usable = false, any_deterministic = false;
  for (const ConvAlgorithmCandidate& c : candidates) {
    if (!c.usable) continue;
    any_usable = true;
    any_deterministic = any_deterministic || c.deterministic;
    if (need_deterministic && !c.deterministic) continue;
    if (!smallest || c.workspace < *smallest) smallest = c.workspace;
  }
  if (!any_usable) {
    pick.why_none = "cuDNN has no algorithm for this convolution and dtype";
  } else if (need_deterministic && !any_deterministic) {
    pick.why_none =
        "cuDNN has no deterministic algorithm for this convolution and cuda.deterministic=require; "
        "allow one that is not with --plugin-option cuda.deterministic=prefer";
  } else {
    pick.why_none = std::string("every ") + (need_deterministic ? "deterministic " : "") +
                    "algorithm cuDNN has for this convolution needs more workspace than "
                    "cuda.conv_workspace_limit (" +
                    mib_text(o.workspace_limit) + "); the smallest needs " + mib_text(*smallest) +
                    ": raise it with --plugin-option cuda.conv_workspace_limit=<bytes, e.g. 1GiB>";
  }
  return pick;
}

// The order in which pick_conv_algorithm's rule considers the candidates,
// knowing only which are deterministic: the deterministic ones in the
// heuristic's order, then (prefer) the rest; `any` keeps the heuristic's
// order, `require` drops the rest. Taking the first in this order that is
// usable and fits the workspace limit is the rule's pick, so prepare can
// finalize cuDNN's execution plans (costly: some engines compile there) one
// at a time and stop at the first that fits.
inline std::vector<size_t> conv_candidate_order(const std::vector<bool>& deterministic, Determinism d) {
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < deterministic.size(); ++i) {
      const bool first_pass = d == Determinism::any || deterministic[i];
      if (pass == 0 ? first_pass : !first_pass && d == Determinism::prefer) order.push_back(i);
    }
  return order;
}

// What cuDNN's graph API notes of an engine's arithmetic.
struct EngineNumerics {
  bool tensor_core = false;                  // on f32 data, TF32 products
  bool down_converts_inputs = false;         // computes in a type narrower than the data's
  bool reduced_precision_reduction = false;  // accumulates below f32
  bool nondeterministic = false;             // atomics: the bits move from run to run
};

// Whether an engine keeps what the plugin promises (README): f16 and bf16
// accumulate in f32, and f32 stays f32 unless cuda.tf32 allows TF32.
inline bool engine_numerics_allowed(const EngineNumerics& e, bool f32_data, bool tf32) {
  if (e.reduced_precision_reduction) return false;
  return !f32_data || tf32 || !(e.tensor_core || e.down_converts_inputs);
}

inline std::optional<Determinism> parse_determinism(std::string_view v) {
  if (v == "prefer") return Determinism::prefer;
  if (v == "require") return Determinism::require;
  if (v == "any") return Determinism::any;
  return std::nullopt;
}

// cuda.conv_api: which cuDNN interface runs the convolutions. `graph` (the
// default) is cuDNN's graph (backend) API; `legacy` the cudnnConvolution*
// calls cuDNN 9 deprecates, kept to compare against on a GPU.
enum class ConvApi { graph, legacy };

inline std::optional<ConvApi> parse_conv_api(std::string_view v) {
  if (v == "graph") return ConvApi::graph;
  if (v == "legacy") return ConvApi::legacy;
  return std::nullopt;
}

// cuda.conv_workspace_limit: the SDK's size grammar (tandem/byte_size.hpp,
// as --memory-budget: "1048576", "512KiB", "1.5 GiB"), and "0" for
// algorithms without a workspace; nullopt for anything else.
inline std::optional<size_t> parse_bytes(std::string_view v) {
  if (v == "0") return size_t(0);
  const std::optional<uint64_t> n = parse_byte_size(std::string(v));
  if (!n || *n > SIZE_MAX) return std::nullopt;
  return size_t(*n);
}

}  // namespace tandem::cuda::math

#endif  // TANDEM_CUDA_MATH_CONV_ALGORITHM_HPP
