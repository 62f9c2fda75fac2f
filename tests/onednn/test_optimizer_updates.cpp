// The optimizers' updates (sgd_update, adamw_update) on tensors of many
// chunks: threaded over chunks of vector_loops.hpp's kUpdateChunk, each
// compiled for the CPU's vector level (ONEDNN_MAX_CPU_ISA=AVX2 runs the
// AVX2 copy). The conformance kit checks small tensors against the
// reference backend; this checks 100003 elements (7 chunks and a tail no
// vector width divides) against PyTorch's formulas in double, the same bits
// on 1, 2 and 3 threads, and in place the same bits as out of place.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

constexpr int64_t kElements = 100003;

tc::HostTensor scalar(tdm_dtype dt, double v) {
  return tc::HostTensor::from_values(dt, {}, {v});
}

struct Update {
  std::string op;
  tc::Attrs attrs;
  std::vector<tc::HostTensor> inputs;
  std::vector<tc::TensorShape> outputs;
  std::vector<std::pair<size_t, size_t>> in_place;  // (output, input)
};

// Runs the update on 1, 2 and 3 threads and in place: every run the same
// bits as the first; returns the first.
tc::RunResult run_every_way(const Update& u) {
  tc::RunResult first;
  for (int threads : {1, 2, 3})
    for (bool in_place : {false, true}) {
      ThreadCount use(threads);
      tc::RunOptions options;
      if (in_place) options.in_place = u.in_place;
      tc::RunResult r = tc::run_op(*loaded().kit, u.op, u.attrs, u.inputs, u.outputs, options);
      EXPECT_TRUE(r.outcome.ok()) << u.op << ": " << r.outcome.message;
      if (!r.outcome.ok()) return r;
      if (threads == 1 && !in_place) {
        first = std::move(r);
        continue;
      }
      for (size_t i = 0; i < r.outputs.size(); ++i)
        EXPECT_TRUE(r.outputs[i].bitwise_equal(first.outputs[i]))
            << u.op << " output " << i << " on " << threads << " threads" << (in_place ? ", in place" : "");
    }
  return first;
}

// got within f32 rounding of want, element by element.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << what << " element " << i;
}

struct SgdCase {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

TEST(OnednnOptimizerUpdates, SgdIsPyTorchsStepOnEveryThreadCountAndInPlace) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const double lr = 0.1;
  const tc::HostTensor param = values({kElements}, 1), grad = values({kElements}, 2),
                       buf = values({kElements}, 3);
  const std::vector<double> p = param.to_f64(), g = grad.to_f64(), b = buf.to_f64();
  for (const SgdCase& c :
       {SgdCase{0, 0, 0.01, false}, SgdCase{0.9, 0.1, 1e-4, false}, SgdCase{0.9, 0, 0.01, true}}) {
    const bool momentum = c.momentum != 0;
    Update u{"sgd_update", {}, {param, grad, scalar(TDM_F32, lr)}, {{TDM_F32, {kElements}}}, {{0, 0}}};
    u.attrs.number("momentum", c.momentum)
        .number("dampening", c.dampening)
        .number("weight_decay", c.weight_decay)
        .integer("nesterov", c.nesterov);
    if (momentum) {
      u.inputs.push_back(buf);
      u.outputs.push_back({TDM_F32, {kElements}});
      u.in_place.push_back({1, 3});
    }
    const tc::RunResult r = run_every_way(u);
    if (!r.outcome.ok()) return;
    std::vector<double> want_p(p.size()), want_b(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + c.weight_decay * p[i];
      want_b[i] = c.momentum * b[i] + (1 - c.dampening) * d;
      const double step = !momentum ? d : c.nesterov ? d + c.momentum * want_b[i] : want_b[i];
      want_p[i] = p[i] - lr * step;
    }
    const std::string what = "sgd momentum " + std::to_string(c.momentum) + (c.nesterov ? " nesterov" : "");
    expect_close(r.outputs[0].to_f64(), want_p, what + ": param");
    if (momentum) expect_close(r.outputs[1].to_f64(), want_b, what + ": momentum buffer");
  }
}

TEST(OnednnOptimizerUpdates, AdamwIsPyTorchsStepOnEveryThreadCountAndInPlace) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  const int step = 3;
  const tc::HostTensor param = values({kElements}, 4), grad = values({kElements}, 5),
                       m = values({kElements}, 6);
  // The second moment is never negative.
  std::vector<double> v = values({kElements}, 7).to_f64();
  for (double& x : v) x = x * x;
  const tc::HostTensor vt = tc::HostTensor::from_values(TDM_F32, {kElements}, v);
  Update u{"adamw_update",
           {},
           {param, grad, m, vt, scalar(TDM_F32, lr), scalar(TDM_S32, step)},
           {{TDM_F32, {kElements}}, {TDM_F32, {kElements}}, {TDM_F32, {kElements}}},
           {{0, 0}, {1, 2}, {2, 3}}};
  u.attrs.number("beta1", b1).number("beta2", b2).number("epsilon", eps).number("weight_decay", wd);
  const tc::RunResult r = run_every_way(u);
  if (!r.outcome.ok()) return;
  const std::vector<double> p = param.to_f64(), g = grad.to_f64(), m0 = m.to_f64(), v0 = vt.to_f64();
  std::vector<double> want_p(p.size()), want_m(p.size()), want_v(p.size());
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  for (size_t i = 0; i < p.size(); ++i) {
    want_m[i] = b1 * m0[i] + (1 - b1) * g[i];
    want_v[i] = b2 * v0[i] + (1 - b2) * g[i] * g[i];
    want_p[i] = p[i] * (1 - lr * wd) - lr * (want_m[i] / bc1) / (std::sqrt(want_v[i] / bc2) + eps);
  }
  expect_close(r.outputs[1].to_f64(), want_m, "adamw: first moment");
  expect_close(r.outputs[2].to_f64(), want_v, "adamw: second moment");
  expect_close(r.outputs[0].to_f64(), want_p, "adamw: param");
}

}  // namespace
