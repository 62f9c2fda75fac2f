// Gradient checks through the reference plugin, in f64.
//
// For a forward op y = f(x...) and a random cotangent r, L = Σ_k <r_k, y_k>.
// The numerical gradient is the central difference
//     dL/dx_i ≈ (L(x + h e_i) - L(x - h e_i)) / 2h,  h = 1e-6·(|x_i| + 1),
// and must match what the catalog's gradient op(s) compute from r.
//
// Tolerance, with err = |analytic - numeric| / max(1, |numeric|):
//     tol = 1e-6 + 1e-9 · Σ|r·y|
// The truncation error of a central difference is h²·|f'''|/6 ~ 1e-12 for
// the smooth ops here (inputs are kept away from kinks: relu's 0, pooling
// ties); the rounding error is ~ eps64·Σ|r·y| / h ≈ 2.2e-10·Σ|r·y|, given 5x
// room. A wrong gradient (a missing term, a transposed index, a wrong scale)
// is off by far more than 1e-6.
#ifndef TANDEM_GRADCHECK_HPP
#define TANDEM_GRADCHECK_HPP

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tandem/conformance/run_op.hpp"

namespace gradcheck {

using tandem::conformance::Attrs;
using tandem::conformance::Fill;
using tandem::conformance::HostTensor;
using tandem::conformance::TensorShape;
using Dims = std::vector<int64_t>;

constexpr tdm_dtype F64 = TDM_F64;

tandem::conformance::PluginUnderTest& reference();

// Deterministic random tensors (one generator per test, seeded by its name).
HostTensor random(const Dims& dims, Fill fill = Fill::range(-1, 1), tdm_dtype dt = F64);
// Uniform in [lo, hi] with a random sign: keeps values away from 0 (relu).
HostTensor away_from_zero(const Dims& dims, double lo, double hi);
HostTensor zeros(const Dims& dims, tdm_dtype dt = F64);
void reseed(const std::string& name);

// Runs an op on reference; fails the test (and returns empty) on any error.
std::vector<HostTensor> run(const std::string& op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                            const std::vector<TensorShape>& outputs);
HostTensor run1(const std::string& op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                const TensorShape& output);

// A forward op with its cotangents (absent tensor = output not in L).
struct Forward {
  std::string op;
  Attrs attrs;
  std::vector<HostTensor> inputs;
  std::vector<TensorShape> outputs;
  std::vector<HostTensor> cotangents;
};

// Draws a cotangent for every output listed in `which` (others absent).
void draw_cotangents(Forward& f, const std::vector<size_t>& which);

// dL/d(input `wrt`) by central differences.
HostTensor numeric_grad(const Forward& f, size_t wrt);

// Compares an analytic gradient with the numerical one (flat, same numel).
void expect_grad(const HostTensor& analytic, const HostTensor& numeric, const Forward& f,
                 const std::string& what);

// Shorthand: numeric gradient of input `wrt` against `analytic`.
inline void check(const Forward& f, size_t wrt, const HostTensor& analytic, const std::string& what) {
  expect_grad(analytic, numeric_grad(f, wrt), f, what);
}

// Every test reseeds the generator from its own name: reproducible draws.
class Grad : public ::testing::Test {
 protected:
  void SetUp() override { reseed(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
};

}  // namespace gradcheck

#endif
