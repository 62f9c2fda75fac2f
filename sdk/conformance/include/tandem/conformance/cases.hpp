// Tandem conformance kit — the case catalogue.
//
// One Case is one op invocation: dtypes, shapes, attributes and how to draw
// the inputs. The catalogue covers every op of sdk/ops.md (catalog v1) with
// several shapes each: odd sizes, batch 1, broadcasting, every attribute
// that changes the arithmetic, optional tensors present and absent, and
// every dtype the catalog lists for the op.
#ifndef TANDEM_CONFORMANCE_CASES_HPP
#define TANDEM_CONFORMANCE_CASES_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/conformance/host_tensor.hpp"
#include "tandem/conformance/run_op.hpp"

namespace tandem::conformance {

struct InputSpec {
  TensorShape shape;  // dtype TDM_DTYPE_INVALID: an absent optional input
  Fill fill;
};

struct Case {
  std::string op;
  tdm_dtype dtype = TDM_F32;  // the case's main dtype (reports, --dtype filter)
  Attrs attrs;
  std::vector<InputSpec> inputs;
  std::vector<TensorShape> outputs;
  RunOptions options;  // in-place aliasing
  int64_t k = 0;       // terms accumulated per output element (tolerance)
  // Makes drawn inputs consistent where an op needs it (saved statistics
  // that match x); runs after the random draw. May be null.
  void (*fixup)(const Case&, std::vector<HostTensor>&) = nullptr;

  Case() = default;
  Case(std::string op_name, tdm_dtype d) : op(std::move(op_name)), dtype(d) {}
  Case& in(tdm_dtype d, std::vector<int64_t> dims, Fill fill = Fill::range(-1, 1));
  Case& none();  // absent optional input
  Case& out(tdm_dtype d, std::vector<int64_t> dims);
  Case& no_out();  // absent optional output
  Case& alias(size_t output, size_t input);
  Case& acc(int64_t terms) {
    k = terms;
    return *this;
  }
  std::string label() const;  // "2x3x5x5,4x3x3x3,- stride=2,2"
  uint64_t seed() const;      // stable: derived from op, dtype and label
};

// The attribute sets an activation of the catalog is checked with: none
// (the defaults), every value of each string attribute, and each float
// attribute at up to two other valid values (0 and 2·default + 0.2 where
// its range allows, else default / 4), one attribute at a time. Conformance
// cases and gradient checks both use them, so an activation added to the
// catalog is checked without a line of its own.
std::vector<Attrs> activation_attr_variants(const catalog::Op& op);

// Every case, in catalog order.
const std::vector<Case>& catalogue();

// The op names of the catalog (tandem/op_catalog.hpp), in its order.
const std::vector<std::string>& catalog_ops();

// The inputs of a case, drawn from its seed.
std::vector<HostTensor> make_inputs(const Case& c);

// Builders, one per source file.
void add_dense_cases(std::vector<Case>& out);   // matmul, linear, conv2d
void add_nn_cases(std::vector<Case>& out);      // pools, activations, losses, norms, embedding, dropout
void add_tensor_cases(std::vector<Case>& out);  // elementwise, reductions, shape ops, cast, fill, optimizers
void add_quant_cases(std::vector<Case>& out);   // quantize, dequantize, linear_int8, fake_quant (SDK 1.3)
void add_transformer_cases(std::vector<Case>& out);  // rms_norm, rope, attention (SDK 1.5)

// The dtypes the catalog lists for floating ops, by column.
inline const std::vector<tdm_dtype> kF32Bf16F16 = {TDM_F32, TDM_BF16, TDM_F16};
inline const std::vector<tdm_dtype> kF32Bf16 = {TDM_F32, TDM_BF16};
inline const std::vector<tdm_dtype> kF32Only = {TDM_F32};
inline const std::vector<tdm_dtype> kAllDtypes = {TDM_F32, TDM_F64, TDM_F16, TDM_BF16,
                                                  TDM_S8,  TDM_U8,  TDM_S32, TDM_S64};

}  // namespace tandem::conformance

#endif
