// Reference backend — softmax_cross_entropy, its gradient, and count_correct.
//
// Computed entirely in double (the log-softmax of softmax_rows.hpp) and
// rounded once on store. Cross entropy follows PyTorch's CrossEntropyLoss with
// ignore_index and label_smoothing ε:
//   loss_i = (1-ε)·(-log p[i, y_i]) + ε·mean_c(-log p[i, c])
// summed over the non-ignored samples, divided by their count for "mean"
// (0 when every sample is ignored, where PyTorch gives NaN).
#include <cmath>

#include "softmax_rows.hpp"

namespace tandem::reference {
namespace {

struct LossConfig {
  int64_t N, C;
  bool mean;
  int64_t ignore_index;
  double smoothing;
  tdm_dtype dt, label_dt;
};

// Logits [N, C] (input `first`), s32 labels [N] (first+1) and the
// attributes, which the shape rule and the catalog have checked.
LossConfig loss_config(const Check& c, size_t first) {
  LossConfig k{};
  k.dt = c.primary_dtype(first, kF32);
  k.N = c.in(first).dims[0], k.C = c.in(first).dims[1];
  k.label_dt = TDM_S32;
  k.mean = c.string_attr("reduction") == "mean";  // else "sum"
  k.ignore_index = c.int_attr("ignore_index");
  k.smoothing = c.float_attr("label_smoothing");  // in [0, 1]
  return k;
}

// Labels, checked at launch: out of [0, C) and not ignore_index is an error.
std::vector<int64_t> checked_labels(const std::string& where, const LossConfig& k, const void* data) {
  std::vector<int64_t> labels = load_indices(data, k.label_dt, k.N);
  for (int64_t i = 0; i < k.N; ++i) {
    const int64_t y = labels[size_t(i)];
    if (y != k.ignore_index && (y < 0 || y >= k.C))
      throw Error(TDM_INVALID_ARGUMENT, where + ": label " + std::to_string(y) + " of sample " +
                                            std::to_string(i) + " is out of range [0, " +
                                            std::to_string(k.C) + ") and is not ignore_index " +
                                            std::to_string(k.ignore_index));
  }
  return labels;
}

int64_t counted(const LossConfig& k, const std::vector<int64_t>& labels) {
  int64_t n = 0;
  for (int64_t y : labels) n += y != k.ignore_index;
  return n;
}

std::unique_ptr<Kernel> cross_entropy(const OpView& view, size_t&) {
  Check c(view);
  const LossConfig k = loss_config(c, 0);
  const std::string where = c.where();  // the OpView dies with prepare
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<int64_t> labels = checked_labels(where, k, in[1]);
    const std::vector<double> logp =
        log_softmax_rows(load<double>(in[0], k.dt, k.N * k.C), Rows{k.N, k.C, 1});
    double total = 0;
    for (int64_t i = 0; i < k.N; ++i) {
      if (labels[size_t(i)] == k.ignore_index) continue;
      double mean_nll = 0;
      for (int64_t j = 0; j < k.C; ++j) mean_nll -= logp[size_t(i * k.C + j)];
      mean_nll /= double(k.C);
      total += (1 - k.smoothing) * -logp[size_t(i * k.C + labels[size_t(i)])] + k.smoothing * mean_nll;
    }
    const int64_t n = counted(k, labels);
    const double loss = k.mean ? (n > 0 ? total / double(n) : 0.0) : total;
    store_double(out[0], k.dt, 0, loss);
  });
}

// dlogits[i,c] = s·(p[i,c] - (1-ε)·[c == y_i] - ε/C), s = dloss (sum) or
// dloss/count (mean); rows of ignored samples are 0.
std::unique_ptr<Kernel> cross_entropy_grad(const OpView& view, size_t&) {
  Check c(view);
  const LossConfig k = loss_config(c, 1);
  const std::string where = c.where();  // the OpView dies with prepare
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<int64_t> labels = checked_labels(where, k, in[2]);
    const std::vector<double> logp =
        log_softmax_rows(load<double>(in[1], k.dt, k.N * k.C), Rows{k.N, k.C, 1});
    const int64_t n = counted(k, labels);
    const double dloss = load_double(in[0], k.dt, 0);
    const double s = k.mean ? (n > 0 ? dloss / double(n) : 0.0) : dloss;
    std::vector<double> dx(logp.size(), 0.0);
    for (int64_t i = 0; i < k.N; ++i) {
      if (labels[size_t(i)] == k.ignore_index) continue;
      for (int64_t j = 0; j < k.C; ++j) {
        const double target =
            (1 - k.smoothing) * (j == labels[size_t(i)] ? 1.0 : 0.0) + k.smoothing / double(k.C);
        dx[size_t(i * k.C + j)] = s * (std::exp(logp[size_t(i * k.C + j)]) - target);
      }
    }
    store(out[0], k.dt, dx);
  });
}

// count_correct: the rows whose label is the first index of their largest
// logit; a row with a NaN, or a label outside [0, C), is never right.
std::unique_ptr<Kernel> count_correct(const OpView& view, size_t&) {
  Check c(view);
  const tdm_dtype dt = c.primary_dtype(0, kF32);
  const int64_t N = c.in(0).dims[0], C = c.in(0).dims[1];
  return make_kernel(c, [=](void* const* in, void* const* out) {
    const std::vector<double> logits = load<double>(in[0], dt, N * C);
    const std::vector<int64_t> labels = load_indices(in[1], TDM_S32, N);
    int64_t right = 0;
    for (int64_t i = 0; i < N; ++i) {
      const double* row = logits.data() + i * C;
      int64_t best = 0;
      bool nan = false;
      for (int64_t j = 0; j < C; ++j) {
        nan = nan || std::isnan(row[j]);
        if (row[j] > row[best]) best = j;
      }
      right += !nan && C > 0 && best == labels[size_t(i)];
    }
    store(out[0], TDM_F32, std::vector<double>{double(right)});
  });
}

[[maybe_unused]] const bool registered = sections().enlist([](Registry& r) {
  r.add("softmax_cross_entropy", cross_entropy);
  r.add("softmax_cross_entropy_grad", cross_entropy_grad);
  r.add("count_correct", count_correct);
});

}  // namespace

}  // namespace tandem::reference
