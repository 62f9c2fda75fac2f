// Tandem SDK — the rotation frequencies of `rope` (sdk/ops.md, "rope"),
// part of the header-only C++ helper, for backends and tools that build
// their own angle tables.
//
// Pair i of a head of D dims turns by p·f_i at position p, where
// f_i = base^(−2i/D) and, with `scaling = "llama3"` (Llama 3.1's long
// context), frequencies of long wavelength are divided by `factor`, short
// ones are kept, and those between blend the two linearly in
// original_context / wavelength. Everything is in double: a frequency off
// by one f32 ulp is an angle off by p·6e-8 rad.
//
// The functions are plain arithmetic with no library state, so a CUDA
// backend may call them in device code (TDM_ROPE_HD is __host__ __device__
// under nvcc).
#ifndef TANDEM_ROPE_FREQUENCY_HPP
#define TANDEM_ROPE_FREQUENCY_HPP

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TDM_ROPE_HD __host__ __device__
#else
#define TDM_ROPE_HD
#endif

namespace tandem {

// The op's attributes (their catalog defaults mean "no scaling").
struct RopeFrequency {
  double base = 10000.0;
  bool llama3 = false;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_context = 8192.0;

  // The frequency of pair i of `half` = D/2 pairs.
  TDM_ROPE_HD double operator()(int64_t i, int64_t half) const {
    const double f = exp(-log(base) * static_cast<double>(i) / static_cast<double>(half));
    if (!llama3) return f;
    // wavelength 2π/f against original_context/low (long) and /high (short).
    const double cycles = original_context * f / 6.283185307179586;  // original_context / wavelength
    if (cycles < low_freq_factor) return f / factor;
    if (cycles > high_freq_factor) return f;
    const double smooth = (cycles - low_freq_factor) / (high_freq_factor - low_freq_factor);
    return (1.0 - smooth) * f / factor + smooth * f;
  }
};

// The frequencies a rope node's attributes ask for, read through anything
// with the kit's float_attr/int_attr/string_attr(name) that fall back to
// the catalog's defaults (tandem::Check, shapes::Query).
template <class Attrs>
RopeFrequency rope_frequency_of(const Attrs& a) {
  RopeFrequency r;
  r.base = a.float_attr("base");
  r.llama3 = a.string_attr("scaling") == "llama3";
  r.factor = a.float_attr("factor");
  r.low_freq_factor = a.float_attr("low_freq_factor");
  r.high_freq_factor = a.float_attr("high_freq_factor");
  r.original_context = static_cast<double>(a.int_attr("original_context"));
  return r;
}

}  // namespace tandem

#endif  // TANDEM_ROPE_FREQUENCY_HPP
