#include "train/narrowed_bases.hpp"

#include <cstring>
#include <vector>

#include "checkpoint/float_tensors.hpp"
#include "exec/tensor_text.hpp"
#include "lowering/lora_base.hpp"
#include "ops/shapes.hpp"
#include "quant/affine.hpp"
#include "tandem/half.hpp"

namespace tandem::host::train {
namespace {

using checkpoint::TensorRecord;

template <class T>
TensorRecord record(const std::string& name, tdm_dtype dtype, std::vector<int64_t> shape,
                    const std::vector<T>& values) {
  TensorRecord t{name, dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace

Result<checkpoint::Checkpoint> narrowed_bases(const Graph& graph, const checkpoint::Checkpoint& cp,
                                              const std::string& source) {
  checkpoint::Checkpoint made;
  for (size_t i = 0; i < graph.value_count(); ++i) {
    const Value& v = *graph.value_at(i);
    const Value* scale = graph.value_by_name(v.name + lowering::kInt8BaseScale);
    const bool int8 = v.type.dtype == TDM_S8 && scale != nullptr, bf16 = v.type.dtype == TDM_BF16;
    if (v.kind != TDM_VALUE_PARAMETER || v.type.dims.size() != 2 || (!int8 && !bf16)) continue;
    const TensorRecord* t = cp.find(v.name);
    if (t == nullptr || t->dtype == v.type.dtype || (int8 && cp.find(scale->name) != nullptr)) continue;
    if (!checkpoint::is_float_dtype(t->dtype) || t->shape != v.type.dims)
      return make_error(source + ": tensor '" + v.name + "' is " + ops::dims_str(t->shape) + " (" +
                            exec::dtype_name(t->dtype) + "); the model's " + exec::dtype_name(v.type.dtype) +
                            " base is made from floating-point weights " + ops::dims_str(v.type.dims),
                        TDM_INVALID_ARGUMENT);
    const int64_t rows = v.type.dims[0], cols = v.type.dims[1];
    auto widened = checkpoint::as_f32(*t, source);
    if (!widened) return widened.error();
    const std::vector<float>& w = *widened;
    if (bf16) {
      std::vector<uint16_t> narrow(w.size());
      for (size_t k = 0; k < w.size(); ++k) narrow[k] = f32_to_bf16(w[k]);
      made.tensors.push_back(record(v.name, TDM_BF16, v.type.dims, narrow));
      continue;
    }
    const quant::QuantizedWeights q = quant::quantize_weights(w, rows, cols, /*per_channel=*/true);
    made.tensors.push_back(record(v.name, TDM_S8, v.type.dims, q.values));
    made.tensors.push_back(record(scale->name, TDM_F32, {rows}, q.scales));
  }
  return made;
}

}  // namespace tandem::host::train
