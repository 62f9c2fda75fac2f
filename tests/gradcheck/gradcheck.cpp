// Finite-difference machinery shared by the gradient checks.
#include "gradcheck.hpp"

#include <cmath>
#include <cstdio>

namespace gradcheck {

namespace tc = tandem::conformance;

namespace {
tc::Rng& rng() {
  static tc::Rng r(1);
  return r;
}
}  // namespace

void reseed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 1099511628211ull;
  rng() = tc::Rng(h);
}

tc::PluginUnderTest& reference() {
  static std::unique_ptr<tc::PluginUnderTest> plugin = [] {
    tc::Outcome o;
    auto p = tc::PluginUnderTest::open(TANDEM_REFERENCE_PLUGIN, o);
    if (!p) {
      std::fprintf(stderr, "cannot open the reference plugin: %s\n", o.message.c_str());
      std::abort();
    }
    return p;
  }();
  return *plugin;
}

HostTensor random(const Dims& dims, Fill fill, tdm_dtype dt) {
  return HostTensor::random(TensorShape(dt, dims), fill, rng());
}

HostTensor away_from_zero(const Dims& dims, double lo, double hi) {
  HostTensor t(F64, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, rng().uniform(lo, hi) * (rng().next() & 1 ? 1 : -1));
  return t;
}

HostTensor zeros(const Dims& dims, tdm_dtype dt) {
  return HostTensor(dt, dims);
}

std::vector<HostTensor> run(const std::string& op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                            const std::vector<TensorShape>& outputs) {
  tc::RunResult r = tc::run_op(reference(), op, attrs, inputs, outputs);
  EXPECT_TRUE(r.outcome.ok()) << op << " " << attrs.str() << ": " << tc::status_name(r.outcome.status) << ": "
                              << r.outcome.message;
  if (!r.outcome.ok()) {
    std::vector<HostTensor> empty;
    for (const TensorShape& s : outputs) empty.emplace_back(s);
    return empty;
  }
  return r.outputs;
}

HostTensor run1(const std::string& op, const Attrs& attrs, const std::vector<HostTensor>& inputs,
                const TensorShape& output) {
  return run(op, attrs, inputs, {output})[0];
}

void draw_cotangents(Forward& f, const std::vector<size_t>& which) {
  f.cotangents.assign(f.outputs.size(), HostTensor());
  for (size_t k : which) f.cotangents[k] = random(f.outputs[k].dims);
}

namespace {

// L = Σ_k <r_k, y_k>, and Σ|r·y| for the tolerance.
double loss(const Forward& f, const std::vector<HostTensor>& in, double* magnitude = nullptr) {
  const std::vector<HostTensor> y = run(f.op, f.attrs, in, f.outputs);
  double l = 0, m = 0;
  for (size_t k = 0; k < y.size(); ++k) {
    if (!f.cotangents[k].present()) continue;
    for (int64_t i = 0; i < y[k].numel(); ++i) {
      const double t = f.cotangents[k].get(i) * y[k].get(i);
      l += t;
      m += std::fabs(t);
    }
  }
  if (magnitude) *magnitude = m;
  return l;
}

}  // namespace

HostTensor numeric_grad(const Forward& f, size_t wrt) {
  std::vector<HostTensor> in = f.inputs;
  HostTensor g(F64, in[wrt].dims());
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double x = f.inputs[wrt].get(i), h = 1e-6 * (std::fabs(x) + 1);
    in[wrt].set(i, x + h);
    const double up = loss(f, in);
    in[wrt].set(i, x - h);
    const double down = loss(f, in);
    in[wrt].set(i, x);
    g.set(i, (up - down) / (2 * h));
  }
  return g;
}

void expect_grad(const HostTensor& analytic, const HostTensor& numeric, const Forward& f,
                 const std::string& what) {
  ASSERT_EQ(analytic.numel(), numeric.numel()) << what;
  double magnitude = 0;
  loss(f, f.inputs, &magnitude);
  const double tol = 1e-6 + 1e-9 * magnitude;
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < numeric.numel(); ++i) {
    const double a = analytic.get(i), n = numeric.get(i);
    const double err = std::isnan(a) ? INFINITY : std::fabs(a - n) / std::fmax(1.0, std::fabs(n));
    if (at < 0 || err > worst) worst = err, at = i;
  }
  EXPECT_LE(worst, tol) << f.op << " " << f.attrs.str() << ": " << what << " element #" << at
                        << " analytic=" << analytic.get(at) << " numeric=" << numeric.get(at);
}

}  // namespace gradcheck
