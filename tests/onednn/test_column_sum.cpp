// The sums over the rows of a [rows, cols] tensor (ops/column_sum.hpp):
// linear_grad_weight's dbias where oneDNN's matmul makes dw, and reduce_sum
// over a leading axis. Each column is summed in row order into an f32
// accumulator by one thread, so the result must be exactly the f32 sum in
// row order, the same bits on any thread count; the conformance kit checks
// the values against the reference backend within a tolerance only.
#include <gtest/gtest.h>

#include "plugin_fixture.hpp"

using namespace onednn_test;

namespace {

// Shapes: a column count under one cache line, one that splits unevenly
// over 2 and 3 threads, and one wider than a task's 1024 columns; row
// counts that leave 1 and 3 rows after the passes of four.
struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{1001, 5}, {1003, 200}, {257, 3000}};

// The f32 sums of x's columns, rows in order.
std::vector<float> in_order_sums(const tc::HostTensor& x, int64_t rows, int64_t cols) {
  const std::vector<double> v = x.to_f64();
  std::vector<float> sums(size_t(cols), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) sums[size_t(j)] += float(v[size_t(r * cols + j)]);
  return sums;
}

// Runs `op` on 1, 2 and 3 threads; output `out` must be `want`, bit for bit, on each.
void expect_sums(const std::string& op, const tc::Attrs& attrs, const std::vector<tc::HostTensor>& inputs,
                 const std::vector<tc::TensorShape>& outputs, size_t out, const std::vector<float>& want) {
  for (int threads : {1, 2, 3}) {
    ThreadCount use(threads);
    const tc::RunResult r = tc::run_op(*loaded().kit, op, attrs, inputs, outputs);
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
    const std::vector<double> got = r.outputs[out].to_f64();
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_EQ(float(got[j]), want[j]) << op << ", column " << j << ", " << threads << " threads";
  }
}

}  // namespace

TEST(OnednnColumnSum, BiasGradientIsTheInOrderF32SumOnAnyThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.cols));
    const int64_t in = 3;
    const tc::HostTensor dy = values({s.rows, s.cols}, 1), x = values({s.rows, in}, 2);
    expect_sums("linear_grad_weight", {}, {dy, x}, {{TDM_F32, {s.cols, in}}, {TDM_F32, {s.cols}}}, 1,
                in_order_sums(dy, s.rows, s.cols));
  }
}

TEST(OnednnColumnSum, ReduceSumOverTheLeadingAxisIsTheInOrderF32SumOnAnyThreadCount) {
  ASSERT_NE(loaded().device, nullptr) << last_error();
  tc::Attrs axes;
  axes.ints("axes", {0});
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.cols));
    const tc::HostTensor x = values({s.rows, s.cols}, 3);
    expect_sums("reduce_sum", axes, {x}, {{TDM_F32, {s.cols}}}, 0, in_order_sums(x, s.rows, s.cols));
  }
}
