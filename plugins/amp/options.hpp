// [features.amp] keys, parsed and checked once at create.
//
//   dtype = "bf16" | "f16"        compute dtype (default bf16)
//   loss_scale = "dynamic" | "none" | <number>
//       dynamic: scale the loss gradient, unscale the parameter gradients,
//       skip and back off on overflow, grow after growth_interval clean
//       steps. none: no scaling and no overflow check. A number: that fixed
//       scale, overflowed steps still skipped and logged.
//       Default: dynamic for f16 (its largest finite value is 65504 and its
//       smallest normal 6e-5, so small gradients underflow without scaling);
//       none for bf16, which has f32's exponent range, so scaling buys
//       nothing and the per-gradient overflow check would cost a pass over
//       every gradient each step (set "dynamic" to get it anyway, e.g. to
//       skip steps whose gradients hold a NaN).
//   wide_products = true | false (default true)
//       true: the products amp keeps in f32 (the parameter gradients'
//       linear_grad_weight and the head that makes the logits) read
//       compute-dtype operands and write f32, the sum accumulated in f32
//       and rounded once (ops.md "Wide outputs"): the matrix units' speed,
//       f32 results. Only where the host says every backend of the run
//       computes them ("tandem.wide_products" = "1", ABI 1.11); otherwise,
//       or with false, those products read f32 operands as before.
//   initial_scale (65536), growth (2), backoff (0.5), growth_interval
//   (2000 clean steps), min_scale (1, the floor), hysteresis (2: overflowed
//   steps in a row before the scale backs off; every overflowed step is
//   skipped regardless).
#pragma once

#include <tandem/tandem.hpp>

#include <cstdint>
#include <string>

namespace amp {

enum class Scaling { None, Fixed, Dynamic };

struct Options {
  tdm_dtype dtype = TDM_BF16;
  Scaling scaling = Scaling::None;
  double initial_scale = 65536.0;
  double growth = 2.0;
  double backoff = 0.5;
  int64_t growth_interval = 2000;
  double min_scale = 1.0;
  int64_t hysteresis = 2;
  bool wide_products = false;  // asked (or defaulted) and offered by the host
};

// Throws tandem::Error(TDM_INVALID_ARGUMENT) naming the key and the value.
Options parse_options(const tandem::Config& config);

const char* dtype_name(tdm_dtype dtype);

}  // namespace amp
