// The calibrators: from what an Observer saw to the real range that the u8
// grid of a layer's input activation will cover (values outside saturate).
//
//   minmax      the whole observed range: no clipping, coarsest steps;
//   percentile  clips the tails: keeps the central p% (p = 99.99 keeps all
//               but 1 in 10 000 values, split between the two tails of
//               signed data);
//   entropy     TensorRT's KL-divergence calibrator: the clipping threshold
//               whose quantized histogram loses the least information
//               (entropy.cpp).
#pragma once

#include <string>

#include "quant/affine.hpp"
#include "quant/observer.hpp"
#include "util/result.hpp"

namespace tandem::host::quant {

enum class Method { MinMax, Percentile, Entropy };

Result<Method> parse_method(const std::string& name);
const char* method_name(Method m);
// Whether the method needs the second (histogram) pass.
bool needs_histograms(Method m);

Range minmax_range(const Observer& o);
Range percentile_range(const Observer& o, double percentile);
Range entropy_range(const Observer& o);

// Dispatch on `m` (`percentile` used only by Method::Percentile).
Range calibrate(const Observer& o, Method m, double percentile);

}  // namespace tandem::host::quant
