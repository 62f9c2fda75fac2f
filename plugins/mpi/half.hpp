// MPI comm plugin — f16 and bf16 without MPI support for them.
//
// MPI 3.1 (Open MPI 4) has no 16-bit float types. A tdm f16/bf16 buffer
// travels as a committed contiguous 2-byte datatype, and SUM/MAX/MIN are
// user MPI_Ops that widen each pair of elements to f32, combine, and round
// back (round-to-nearest-even). No extra buffer, no extra traffic; the cost
// is one rounding per reduction step, the same as summing in the 16-bit type
// (see README.md, "Precision"). The conversions are the SDK's
// (tandem/half.hpp). Header-only so the tests can check it.
#ifndef TANDEM_MPI_HALF_HPP
#define TANDEM_MPI_HALF_HPP

#include <cmath>
#include <cstdint>

#include "tandem/half.hpp"

namespace tandem::mpi {

// Element-wise combine used by the user MPI_Ops: inout[i] = op(in[i], inout[i]).
enum class Combine { Sum, Max, Min };

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void combine16(const uint16_t* in, uint16_t* inout, int count, Combine op) noexcept {
  for (int i = 0; i < count; ++i) {
    const float a = ToF32(in[i]), b = ToF32(inout[i]);
    float r = op == Combine::Sum ? a + b : op == Combine::Max ? std::fmax(a, b) : std::fmin(a, b);
    inout[i] = FromF32(r);
  }
}

}  // namespace tandem::mpi

#endif
