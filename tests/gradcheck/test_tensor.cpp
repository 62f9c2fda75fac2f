// Gradient checks: add/sub/mul with broadcasting (reduced with reduce_sum),
// scale, reduce_sum, reduce_mean, transpose, concat.
#include <gtest/gtest-spi.h>

#include "gradcheck.hpp"

namespace gradcheck {

namespace {

// Sums a y-shaped gradient over the axes `target` was broadcast along, with
// the reduce_sum op (keepdims=1: the data then lies exactly as target's).
HostTensor reduce_to(const HostTensor& g, const Dims& target) {
  const Dims& y = g.dims();
  const size_t lead = y.size() - target.size();
  Dims axes, kept;
  for (size_t i = 0; i < y.size(); ++i) {
    const bool broadcast = i < lead || (target[i - lead] == 1 && y[i] != 1);
    if (broadcast) axes.push_back(int64_t(i));
    kept.push_back(broadcast ? 1 : y[i]);
  }
  if (axes.empty()) return g;
  return run1("reduce_sum", Attrs().ints("axes", axes).integer("keepdims", 1), {g}, {F64, kept});
}

Dims broadcast(const Dims& a, const Dims& b) {
  Dims y(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    y[y.size() - 1 - i] = da == 1 ? db : da;
  }
  return y;
}

}  // namespace

TEST_F(Grad, AddSubMulWithBroadcasting) {
  const std::pair<Dims, Dims> shapes[] = {
      {{3, 4}, {3, 4}}, {{2, 1, 3}, {4, 1}}, {{5}, {}}, {{1, 3}, {2, 2, 1}}};
  for (const char* op : {"add", "sub", "mul"})
    for (const auto& [as, bs] : shapes) {
      const Dims ys = broadcast(as, bs);
      Forward f{op, {}, {random(as), random(bs)}, {{F64, ys}}, {}};
      draw_cotangents(f, {0});
      const HostTensor& r = f.cotangents[0];
      HostTensor ga = r, gb = r;  // add
      if (std::string(op) == "sub") gb = run1("scale", Attrs().number("alpha", -1), {r}, {F64, ys});
      if (std::string(op) == "mul") {
        ga = run1("mul", {}, {r, f.inputs[1]}, {F64, ys});
        gb = run1("mul", {}, {r, f.inputs[0]}, {F64, ys});
      }
      const std::string what = std::string(op) + " " + tandem::conformance::dims_str(as) + " with " +
                               tandem::conformance::dims_str(bs);
      check(f, 0, reduce_to(ga, as), "da " + what);
      check(f, 1, reduce_to(gb, bs), "db " + what);
    }
}

// The machinery itself: a gradient off by 1% must be caught.
TEST_F(Grad, MachineryCatchesAWrongGradient) {
  Forward f{"scale", Attrs().number("alpha", 2), {random({5})}, {{F64, {5}}}, {}};
  draw_cotangents(f, {0});
  const HostTensor wrong = run1("scale", Attrs().number("alpha", 2.02), {f.cotangents[0]}, {F64, {5}});
  EXPECT_NONFATAL_FAILURE(check(f, 0, wrong, "planted"), "analytic=");
}

TEST_F(Grad, Scale) {
  const Attrs a = Attrs().number("alpha", -1.7).number("beta", 0.4);
  Forward f{"scale", a, {random({4, 3})}, {{F64, {4, 3}}}, {}};
  draw_cotangents(f, {0});
  check(f, 0, run1("scale", Attrs().number("alpha", -1.7), {f.cotangents[0]}, {F64, {4, 3}}), "dx");
}

// The gradient of a reduction broadcasts r back over the reduced axes: done
// with add(zeros, r viewed with keepdims), then scaled by 1/count for mean.
TEST_F(Grad, ReduceSumAndMean) {
  const Dims x{3, 4, 5};
  struct R {
    Dims axes;
    int keepdims;
    Dims y, kept;
    int64_t count;
  };
  for (const R& r : {R{{1}, 0, {3, 5}, {3, 1, 5}, 4}, R{{}, 0, {}, {1, 1, 1}, 60},
                     R{{0, 2}, 1, {1, 4, 1}, {1, 4, 1}, 15}, R{{-1}, 0, {3, 4}, {3, 4, 1}, 5}})
    for (const char* op : {"reduce_sum", "reduce_mean"}) {
      const Attrs a = Attrs().ints("axes", r.axes).integer("keepdims", r.keepdims);
      Forward f{op, a, {random(x)}, {{F64, r.y}}, {}};
      draw_cotangents(f, {0});
      const HostTensor kept = HostTensor::from_values(F64, r.kept, f.cotangents[0].to_f64());
      HostTensor dx = run1("add", {}, {zeros(x), kept}, {F64, x});
      if (std::string(op) == "reduce_mean")
        dx = run1("scale", Attrs().number("alpha", 1.0 / double(r.count)), {dx}, {F64, x});
      check(f, 0, dx, std::string(op) + " " + a.str());
    }
}

TEST_F(Grad, TransposeByInversePermutation) {
  const Dims x{2, 3, 4};
  for (const Dims& perm : {Dims{2, 0, 1}, Dims{1, 0, 2}, Dims{}}) {
    const Dims p = perm.empty() ? Dims{2, 1, 0} : perm;  // default: reverse
    Dims y, inverse(3);
    for (size_t i = 0; i < 3; ++i) y.push_back(x[size_t(p[i])]), inverse[size_t(p[i])] = int64_t(i);
    Attrs a;
    if (!perm.empty()) a.ints("perm", perm);
    Forward f{"transpose", a, {random(x)}, {{F64, y}}, {}};
    draw_cotangents(f, {0});
    check(f, 0, run1("transpose", Attrs().ints("perm", inverse), {f.cotangents[0]}, {F64, x}),
          "dx " + a.str());
  }
}

TEST_F(Grad, ConcatSplitsTheGradient) {
  for (int64_t axis : {0, 1, -1}) {
    const size_t ax = axis < 0 ? 1 : size_t(axis);
    std::vector<Dims> parts = {{2, 3}, {2, 3}, {2, 3}};
    const int64_t sizes[] = {2, 1, 4};
    Dims y{2, 3};
    y[ax] = 0;
    for (size_t i = 0; i < 3; ++i) parts[i][ax] = sizes[i], y[ax] += sizes[i];
    Forward f{"concat",
              Attrs().integer("axis", axis),
              {random(parts[0]), random(parts[1]), random(parts[2])},
              {{F64, y}},
              {}};
    draw_cotangents(f, {0});
    // dx_i is the slice of r that x_i filled (no slice op in the catalog:
    // cut on the host).
    int64_t offset = 0;
    for (size_t i = 0; i < 3; ++i) {
      HostTensor dx(F64, parts[i]);
      for (int64_t r = 0; r < parts[i][0]; ++r)
        for (int64_t c = 0; c < parts[i][1]; ++c)
          dx.set(r * parts[i][1] + c,
                 f.cotangents[0].get(ax == 0 ? (r + offset) * y[1] + c : r * y[1] + c + offset));
      offset += sizes[i];
      check(f, i, dx, "dx" + std::to_string(i) + " axis " + std::to_string(axis));
    }
  }
}

}  // namespace gradcheck
