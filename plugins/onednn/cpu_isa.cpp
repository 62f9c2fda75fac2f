#include "cpu_isa.hpp"

#include <cstdlib>

#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::onednn {
namespace {

using isa = dnnl::cpu_isa;

isa effective() {
  static const isa value = dnnl::get_effective_cpu_isa();
  return value;
}

// oneDNN's ISA values are bit sets, each holding the bits of the ISAs it
// extends, in oneDNN 2 and 3 alike; a test for inclusion also covers the
// values a newer oneDNN adds (oneDNN 3's avx10_1_512 and avx512_core_amx_fp16
// hold avx512_core_bf16's bits).
bool includes(isa i, isa part) {
  return (static_cast<unsigned>(i) & static_cast<unsigned>(part)) == static_cast<unsigned>(part);
}

bool at_least_avx512_core(isa i) {
  return includes(i, isa::avx512_core);
}

bool has_vnni(isa i) {
  return includes(i, isa::avx512_core_vnni) || includes(i, isa::avx2_vnni);
}

std::string features_of(isa i) {
  const std::string base = at_least_avx512_core(i)   ? "avx512_core"
                           : includes(i, isa::avx2)  ? "avx2"
                           : includes(i, isa::avx)   ? "avx"
                           : includes(i, isa::sse41) ? "sse41"
                                                     : "baseline";
  // FMA comes with AVX2 on every x86-64 CPU oneDNN's AVX2 kernels run on;
  // cpuid confirms it rather than assuming.
  __builtin_cpu_init();
  const bool fma = base != "sse41" && base != "avx" && base != "baseline" && __builtin_cpu_supports("fma");
  std::string out = base;
  if (fma) out += " fma";
  if (has_vnni(i)) out += " vnni";
  if (includes(i, isa::avx512_core_bf16)) out += " bf16";
  if (includes(i, isa::avx512_core_amx)) out += " amx";
  return out;
}

}  // namespace

const std::string& cpu_features() {
  static const std::string features = features_of(effective());
  return features;
}

bool cpu_has_bf16_kernels() {
  return at_least_avx512_core(effective());
}

std::string cpu_bf16_missing_reason() {
  const bool limited = std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr;
  return "this CPU has no bf16 kernels in oneDNN: they need AVX-512 (avx512_core or newer) and oneDNN may "
         "use " +
         cpu_features() + (limited ? " (limited by ONEDNN_MAX_CPU_ISA)" : "") +
         "; compute in f32 on this CPU (without [features.amp] / --feature amp), or use a device whose "
         "features in 'tandem devices' include avx512_core";
}

bool cpu_int8_pairs_saturate() {
  return !has_vnni(effective());
}

VectorLevel cpu_vector_level() {
  const std::string& f = cpu_features();
  const bool fma = f.find(" fma") != std::string::npos;
  if (fma && f.rfind("avx512_core", 0) == 0) return VectorLevel::avx512;
  if (fma && f.rfind("avx2", 0) == 0) return VectorLevel::avx2_fma;
  return VectorLevel::baseline;
}

}  // namespace tandem::onednn
