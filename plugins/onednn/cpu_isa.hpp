// oneDNN backend — what the CPU lets oneDNN use, as oneDNN itself sees it.
//
// Everything here follows oneDNN's *effective* ISA (dnnl_get_effective_cpu_isa):
// the CPU's own instruction sets, capped by ONEDNN_MAX_CPU_ISA when it is set.
// So one machine can run, and test, both the AVX2 and the AVX-512 paths:
// what `tandem devices` shows, which kernels decline, and which INT8 path
// runs all change together with the limit.
#ifndef TANDEM_ONEDNN_CPU_ISA_HPP
#define TANDEM_ONEDNN_CPU_ISA_HPP

#include <string>

namespace tandem::onednn {

// The instruction sets oneDNN's kernels may use, lower-case words separated
// by spaces: "avx2 fma", "avx512_core fma vnni bf16 amx" (tdm_device_info.features).
const std::string& cpu_features();

// Whether oneDNN has bf16 kernels (matmul, convolution, eltwise, pooling) on
// this CPU: oneDNN 2.x needs at least AVX-512 (avx512_core; native bf16
// instructions from avx512_core_bf16, emulated below that).
bool cpu_has_bf16_kernels();

// Why bf16 is declined, for messages: names what the CPU has and lacks.
std::string cpu_bf16_missing_reason();

// Whether oneDNN's u8 x s8 kernels sum pairs of products in saturating
// 16-bit lanes (vpmaddubsw): every ISA without VNNI (AVX2, AVX-512 before
// Cascade Lake). There |x0·w0 + x1·w1| > 32767 saturates: exact only when
// every weight lies within [-64, 64] (see ops/quant_int8_exact.hpp).
bool cpu_int8_pairs_saturate();

// The vector width the backend's own loops may use (ops/attention_tiles.cpp and
// ops/vector_loops.cpp compile them once per level), from the same effective ISA: an
// ONEDNN_MAX_CPU_ISA limit caps them too, so the AVX2 path is testable on
// an AVX-512 machine.
enum class VectorLevel { baseline, avx2_fma, avx512 };
VectorLevel cpu_vector_level();

// The copy of a function for cpu_vector_level(), for the dispatchers of the
// loops compiled once per level.
template <class Fn>
Fn by_vector_level(Fn avx512_fn, Fn avx2_fn, Fn baseline_fn) {
  switch (cpu_vector_level()) {
    case VectorLevel::avx512:
      return avx512_fn;
    case VectorLevel::avx2_fma:
      return avx2_fn;
    case VectorLevel::baseline:
      break;
  }
  return baseline_fn;
}

}  // namespace tandem::onednn

#endif  // TANDEM_ONEDNN_CPU_ISA_HPP
