// What a gradient rule (OpInfo::grad) sees of autodiff while it
// differentiates one forward node: the node, the gradient of its first
// output, and a way to emit backward nodes and hand gradients back.
// lowering/autodiff.cpp implements it; rules live in host/ops/<stem>.cpp.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "util/result.hpp"

namespace tandem::host::ops {

class GradContext {
 public:
  virtual ~GradContext() = default;

  // The forward node being differentiated, and its values.
  virtual const Node& node() const = 0;
  ValueId in(size_t i) const { return i < node().inputs.size() ? node().inputs[i] : kNoValue; }
  ValueId out(size_t j) const { return node().outputs.at(j); }
  // The gradient of the node's first output (the loss's gradient flowing in).
  virtual ValueId dy() const = 0;
  // Whether the loss depends on `v` through something trainable, so that
  // its gradient is wanted (false for kNoValue).
  virtual bool needs(ValueId v) const = 0;
  virtual const TensorType& type(ValueId v) const = 0;

  // A backward node of this node, named "<node>.<suffix>"; returns its outputs.
  virtual Result<std::vector<ValueId>> emit(const std::string& op, const std::string& suffix,
                                            std::vector<ValueId> inputs, std::vector<Attr> attrs,
                                            std::vector<TensorType> outputs) = 0;
  Result<ValueId> emit1(const std::string& op, const std::string& suffix, std::vector<ValueId> inputs,
                        std::vector<Attr> attrs, TensorType out) {
    auto r = emit(op, suffix, std::move(inputs), std::move(attrs), {std::move(out)});
    if (!r) return r.error();
    return (*r)[0];
  }

  // dx is (part of) x's gradient: summed with what x already has.
  virtual Result<void> accumulate(ValueId x, ValueId dx) = 0;
  // For an op that adds x's gradient so far into its result (an `addend`
  // input: linear_grad_input, layer_norm_grad, rms_norm_grad): that gradient, or kNoValue
  // when x has none yet or a backend of the run takes no addend (older than
  // ABI 1.9). The op's result is then all of x's gradient: `replace`, not
  // `accumulate`.
  virtual ValueId partial(ValueId x) const = 0;
  virtual Result<void> replace(ValueId x, ValueId dx) = 0;
  // dx has the broadcast shape of an elementwise op's output: summed over
  // the axes x was broadcast along, reshaped to x, then accumulated.
  virtual Result<void> accumulate_unbroadcast(ValueId x, ValueId dx) = 0;

  // A backward node whose output 0 is (part of) x's gradient: given x's
  // gradient so far as its last input when the op takes an addend
  // (`takes_addend`) and there is one (partial), which then makes output 0
  // all of it (replace); otherwise output 0 is accumulated.
  Result<std::vector<ValueId>> emit_gradient_of(ValueId x, bool takes_addend, const std::string& op,
                                                const std::string& suffix, std::vector<ValueId> inputs,
                                                std::vector<Attr> attrs, std::vector<TensorType> outputs) {
    const ValueId so_far = takes_addend ? partial(x) : kNoValue;
    if (so_far != kNoValue) inputs.push_back(so_far);
    auto r = emit(op, suffix, std::move(inputs), std::move(attrs), std::move(outputs));
    if (!r) return r.error();
    if (auto a = so_far != kNoValue ? replace(x, (*r)[0]) : accumulate(x, (*r)[0]); !a) return a.error();
    return r;
  }

  // The one-input case of most rules: x = input 0 gets `op`(inputs) with x's type.
  Result<void> grad_to_input0(const std::string& op, std::vector<ValueId> inputs, std::vector<Attr> attrs) {
    auto dx = emit1(op, "grad", std::move(inputs), std::move(attrs), type(in(0)));
    if (!dx) return dx.error();
    return accumulate(in(0), *dx);
  }
};

}  // namespace tandem::host::ops
