// Times a backend plugin's fused attention and its gradient on one shape,
// the way the executor runs them: one kernel_prepare each, then launches on
// the same buffers. bench/attention.sh runs it beside PyTorch's
// scaled_dot_product_attention (bench/torch_attention.py) on the same shape
// and prints the ratio.
//
//   tandem-attention-bench --plugin PATH [--threads N] [--shape B,H,T,D]
//                          [--layout bthd|bhtd] [--causal 0|1] [--repeats N]
//
// Prints one line of JSON: the shape, and the forward's and the gradient's
// fastest and median launch in milliseconds. Exit 0 measured, 1 the plugin
// failed (prepare, launch, or two launches not giving the same bits), 2 usage.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/conformance/run_op.hpp"

namespace {

namespace tc = tandem::conformance;

struct Options {
  std::string plugin, layout = "bthd";
  int threads = 1, repeats = 40;
  int64_t B = 32, H = 6, T = 128, D = 32;  // bench/models/gpt.toml's attention
  bool causal = true;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "tandem-attention-bench: %s\n"
               "usage: tandem-attention-bench --plugin PATH [--threads N] [--shape B,H,T,D]\n"
               "                              [--layout bthd|bhtd] [--causal 0|1] [--repeats N]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing the value of " + a).c_str());
    const char* v = argv[++i];
    if (a == "--plugin")
      o.plugin = v;
    else if (a == "--threads")
      o.threads = std::atoi(v);
    else if (a == "--repeats")
      o.repeats = std::atoi(v);
    else if (a == "--layout")
      o.layout = v;
    else if (a == "--causal")
      o.causal = std::atoi(v) != 0;
    else if (a == "--shape") {
      long long b, h, t, d;
      if (std::sscanf(v, "%lld,%lld,%lld,%lld", &b, &h, &t, &d) != 4) usage("--shape takes B,H,T,D");
      o.B = b, o.H = h, o.T = t, o.D = d;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.plugin.empty()) usage("--plugin is required");
  if (o.threads < 1 || o.repeats < 1 || o.B < 1 || o.H < 1 || o.T < 1 || o.D < 1)
    usage("threads, repeats and the shape must be positive");
  if (o.layout != "bthd" && o.layout != "bhtd") usage("--layout is bthd or bhtd");
  return o;
}

tdm_tensor_desc desc(const std::vector<int64_t>& dims) {
  tdm_tensor_desc d{};
  d.struct_size = sizeof d;
  d.dtype = TDM_F32;
  d.rank = uint32_t(dims.size());
  d.dims = dims.data();
  return d;
}

struct Timing {
  double fastest, median;
};

Timing summary(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

}  // namespace

// `op` prepared on the plugin's device, or nullptr after saying why.
template <class Kit>
tdm_kernel* prepare_kernel(Kit& kit, const std::vector<tdm_attr>& attrs, const char* op,
                           std::vector<tdm_tensor_desc>& in, std::vector<tdm_tensor_desc>& out,
                           size_t& workspace) {
  tdm_op_desc d{};
  d.struct_size = sizeof d;
  d.op = op;
  d.op_version = 1;
  d.attrs = attrs.data();
  d.n_attrs = attrs.size();
  d.inputs = in.data();
  d.n_inputs = in.size();
  d.outputs = out.data();
  d.n_outputs = out.size();
  tdm_kernel* k = nullptr;
  if (kit.api().kernel_prepare(kit.device(), &d, &k, &workspace) != TDM_OK) {
    std::fprintf(stderr, "tandem-attention-bench: %s: %s\n", op, tc::last_plugin_error().c_str());
    return nullptr;
  }
  return k;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  tc::Outcome outcome;
  const std::string threads = std::to_string(o.threads);
  auto kit = tc::PluginUnderTest::open(o.plugin, outcome, {{{"threads", threads}}});
  if (!kit) {
    std::fprintf(stderr, "tandem-attention-bench: %s: %s\n", o.plugin.c_str(), outcome.message.c_str());
    return 1;
  }
  omp_set_num_threads(o.threads);
  const std::vector<int64_t> qkv = o.layout == "bthd" ? std::vector<int64_t>{o.B, o.T, o.H, o.D}
                                                      : std::vector<int64_t>{o.B, o.H, o.T, o.D};
  const std::vector<int64_t> lse_dims{o.B, o.H, o.T};
  tc::Attrs attrs;
  attrs.integer("causal", o.causal ? 1 : 0).string("layout", o.layout);
  const std::vector<tdm_attr> attr_view = attrs.view();

  const auto prepare = [&](const char* op, std::vector<tdm_tensor_desc> in, std::vector<tdm_tensor_desc> out,
                           size_t& workspace) {
    return prepare_kernel(*kit, attr_view, op, in, out, workspace);
  };
  size_t ws_forward = 0, ws_grad = 0;
  tdm_kernel* forward =
      prepare("attention", {desc(qkv), desc(qkv), desc(qkv)}, {desc(qkv), desc(lse_dims)}, ws_forward);
  tdm_kernel* grad =
      prepare("attention_grad", {desc(qkv), desc(qkv), desc(qkv), desc(qkv), desc(qkv), desc(lse_dims)},
              {desc(qkv), desc(qkv), desc(qkv)}, ws_grad);
  if (forward == nullptr || grad == nullptr) return 1;

  // The conformance kit's generator and tensors: uniform q, k, v and do.
  tc::Rng rng(1);
  const tc::Fill fill = tc::Fill::range(-0.5, 0.5);
  tc::HostTensor q = tc::HostTensor::random({TDM_F32, qkv}, fill, rng),
                 k = tc::HostTensor::random({TDM_F32, qkv}, fill, rng),
                 v = tc::HostTensor::random({TDM_F32, qkv}, fill, rng),
                 dout = tc::HostTensor::random({TDM_F32, qkv}, fill, rng);
  tc::HostTensor out(TDM_F32, qkv), lse(TDM_F32, lse_dims), dq(TDM_F32, qkv), dk(TDM_F32, qkv),
      dv(TDM_F32, qkv);
  std::vector<char> workspace(std::max(ws_forward, ws_grad));
  void* forward_in[] = {q.data(), k.data(), v.data()};
  void* forward_out[] = {out.data(), lse.data()};
  void* grad_in[] = {dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data()};
  void* grad_out[] = {dq.data(), dk.data(), dv.data()};

  std::vector<double> forward_ms, grad_ms;
  tc::HostTensor first_dq;
  using clock = std::chrono::steady_clock;
  for (int r = 0; r <= o.repeats; ++r) {  // launch 0 warms up
    const auto t0 = clock::now();
    const tdm_status fs =
        kit->api().kernel_launch(forward, kit->stream(), forward_in, forward_out, workspace.data());
    const auto t1 = clock::now();
    const tdm_status gs = kit->api().kernel_launch(grad, kit->stream(), grad_in, grad_out, workspace.data());
    const auto t2 = clock::now();
    if (fs != TDM_OK || gs != TDM_OK) {
      std::fprintf(stderr, "tandem-attention-bench: launch: %s\n", tc::last_plugin_error().c_str());
      return 1;
    }
    if (r == 0) {
      first_dq = dq;
      continue;
    }
    forward_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    grad_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  if (!first_dq.bitwise_equal(dq)) {
    std::fprintf(stderr, "tandem-attention-bench: two launches of attention_grad gave different dq\n");
    return 1;
  }
  kit->api().kernel_release(forward);
  kit->api().kernel_release(grad);
  const Timing f = summary(forward_ms), g = summary(grad_ms);
  std::printf(
      "{\"shape\": [%lld, %lld, %lld, %lld], \"layout\": \"%s\", \"causal\": %d, \"threads\": %d, "
      "\"forward_ms\": {\"fastest\": %.4f, \"median\": %.4f}, \"grad_ms\": {\"fastest\": %.4f, \"median\": "
      "%.4f}}\n",
      (long long)o.B, (long long)o.H, (long long)o.T, (long long)o.D, o.layout.c_str(), o.causal ? 1 : 0,
      o.threads, f.fastest, f.median, g.fastest, g.median);
  return 0;
}
