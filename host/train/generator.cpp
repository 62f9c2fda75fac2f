#include "train/generator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "data/counter_rng.hpp"
#include "train/checkpointing.hpp"

namespace tandem::host::train {

Result<std::unique_ptr<Generator>> Generator::create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                     const PluginRegistry& registry,
                                                     const checkpoint::Checkpoint& cp,
                                                     const std::string& source,
                                                     const lowering::Int8Plan* int8) {
  if (!spec.language_model())
    return make_error(spec.path +
                          " is not a language model ([model] task = \"language_model\"): it has no text "
                          "to generate",
                      TDM_INVALID_ARGUMENT);
  if (spec.input_shape.at(0) < 2)
    return make_error(spec.path + ": [model] context = " + std::to_string(spec.input_shape.at(0)) +
                          ": generating needs a context of at least 2 tokens (one to read, one to write)",
                      TDM_INVALID_ARGUMENT);
  program::ProgramOptions o;
  o.mode = lowering::Mode::Decode;
  o.batch = 1;
  o.int8 = int8;
  o.prefetch = false;
  auto program = program::Program::build(spec, device, registry, std::move(o));
  if (!program) return program.error();
  const lowering::ModelGraph& m = (*program)->model();
  exec::ExecutorOptions options;
  options.outputs = {m.graph.value(m.logits)->name};
  for (const auto& c : m.caches) {
    options.outputs.push_back(m.graph.value(c.k_new)->name);
    options.outputs.push_back(m.graph.value(c.v_new)->name);
  }
  if (auto r = (*program)->allocate(std::move(options)); !r) return r.error();
  if (auto r = restore_tensors(m.graph, (*program)->executor(), cp, true, source, m.lora_adapters); !r)
    return r.error();
  // The whole-window program reads the decode program's parameters.
  program::ProgramOptions w;
  w.mode = lowering::Mode::Eval;
  w.batch = 1;
  w.int8 = int8;
  w.prefetch = false;
  auto window = program::Program::build(spec, device, registry, std::move(w));
  if (!window) return window.error();
  const lowering::ModelGraph& wm = (*window)->model();
  exec::ExecutorOptions shared;
  for (size_t i = 0; i < m.graph.value_count(); ++i) {
    const Value& v = *m.graph.value_at(i);
    if ((v.kind == TDM_VALUE_PARAMETER || v.kind == TDM_VALUE_STATE) &&
        wm.graph.value_by_name(v.name) != nullptr)
      shared.external[v.name] = (*program)->executor().device_pointer(v.id);
  }
  shared.outputs = {wm.graph.value(wm.logits)->name};
  for (const auto& c : wm.caches) {
    shared.outputs.push_back(wm.graph.value(c.k_new)->name);
    shared.outputs.push_back(wm.graph.value(c.v_new)->name);
  }
  if (auto r = (*window)->allocate(std::move(shared)); !r) return r.error();
  return std::unique_ptr<Generator>(new Generator(spec, std::move(*program), std::move(*window)));
}

Generator::Generator(const model::ModelSpec& spec, std::unique_ptr<program::Program> program,
                     std::unique_ptr<program::Program> window)
    : program_(std::move(program)),
      window_program_(std::move(window)),
      context_(spec.input_shape.at(0)),
      vocab_(spec.classes) {
  const lowering::ModelGraph& m = program_->model();
  for (const auto& c : m.caches) {
    const auto& d = m.graph.value(c.k_new)->type.dims;  // [1, G, 1, head_dim]
    keys_.emplace_back(size_t(d[1] * (context_ - 1) * d[3]), 0.f);
    values_.emplace_back(keys_.back().size(), 0.f);
  }
  logits_.resize(size_t(vocab_));
  mask_.resize(size_t(context_));
}

Result<const std::vector<float>*> Generator::step(int32_t token) {
  if (position_ == context_)
    if (auto r = restart_window(); !r) return r.error();
  const lowering::ModelGraph& m = program_->model();
  exec::Executor& ex = program_->executor();
  const int64_t p = position_;
  const int32_t index = int32_t(p), label = 0;
  // Cache slots are right-aligned: the p tokens before this one fill the last p.
  for (int64_t j = 0; j < context_; ++j) mask_[size_t(j)] = j < context_ - 1 - p ? 1 : 0;
  for (auto [value, data, bytes] : {std::tuple{m.input, static_cast<const void*>(&token), sizeof token},
                                    {m.labels, &label, sizeof label},
                                    {m.decode_position, &p, sizeof p},
                                    {m.decode_position_index, &index, sizeof index},
                                    {m.decode_mask, mask_.data(), mask_.size()}})
    if (auto r = ex.write(value, data, bytes); !r) return r.error();
  for (size_t l = 0; l < m.caches.size(); ++l) {
    if (m.caches[l].k_cache == kNoValue) continue;  // a context of one token has no cache
    if (auto r = ex.write(m.caches[l].k_cache, keys_[l].data(), keys_[l].size() * sizeof(float)); !r)
      return r.error();
    if (auto r = ex.write(m.caches[l].v_cache, values_[l].data(), values_[l].size() * sizeof(float)); !r)
      return r.error();
  }
  if (auto r = ex.run(); !r) return r.error();
  if (auto r = ex.read(m.logits, logits_.data(), logits_.size() * sizeof(float)); !r) return r.error();
  // Append the new key and value to each cache: every head's slots shift left.
  for (size_t l = 0; l < m.caches.size(); ++l) {
    const auto& d = m.graph.value(m.caches[l].k_new)->type.dims;
    const int64_t heads = d[1], hd = d[3], slots = context_ - 1;
    fresh_.resize(size_t(heads * hd));
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<float>& cache = kv == 0 ? keys_[l] : values_[l];
      if (auto r = ex.read(kv == 0 ? m.caches[l].k_new : m.caches[l].v_new, fresh_.data(),
                           fresh_.size() * sizeof(float));
          !r)
        return r.error();
      for (int64_t g = 0; g < heads && slots > 0; ++g) {
        float* head = cache.data() + g * slots * hd;
        std::memmove(head, head + hd, size_t((slots - 1) * hd) * sizeof(float));
        std::memcpy(head + (slots - 1) * hd, fresh_.data() + g * hd, size_t(hd) * sizeof(float));
      }
    }
  }
  window_.push_back(token);
  ++position_;
  return &logits_;
}

Result<void> Generator::encode(const std::vector<int32_t>& tokens) {
  const lowering::ModelGraph& m = window_program_->model();
  exec::Executor& ex = window_program_->executor();
  const int64_t n = int64_t(tokens.size()), slots = context_ - 1;
  // Causal attention: the padding after the n tokens changes none of them.
  std::vector<int32_t> ids(size_t(context_), 0), labels(size_t(context_), 0);
  std::copy(tokens.begin(), tokens.end(), ids.begin());
  if (auto r = ex.write(m.input, ids.data(), ids.size() * sizeof(int32_t)); !r) return r.error();
  if (auto r = ex.write(m.labels, labels.data(), labels.size() * sizeof(int32_t)); !r) return r.error();
  if (auto r = ex.run(); !r) return r.error();
  std::vector<float> all(size_t(context_ * vocab_));
  if (auto r = ex.read(m.logits, all.data(), all.size() * sizeof(float)); !r) return r.error();
  std::copy(all.begin() + (n - 1) * vocab_, all.begin() + n * vocab_, logits_.begin());
  // Token j's key and value go to cache slot slots - n + j (right-aligned).
  for (size_t l = 0; l < m.caches.size() && slots > 0; ++l) {
    const auto& d = m.graph.value(m.caches[l].k_new)->type.dims;  // [1, G, context, head_dim]
    const int64_t heads = d[1], hd = d[3];
    std::vector<float> full(size_t(heads * context_ * hd));
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<float>& cache = kv == 0 ? keys_[l] : values_[l];
      if (auto r = ex.read(kv == 0 ? m.caches[l].k_new : m.caches[l].v_new, full.data(),
                           full.size() * sizeof(float));
          !r)
        return r.error();
      std::fill(cache.begin(), cache.end(), 0.f);
      for (int64_t g = 0; g < heads; ++g)
        std::copy(full.begin() + g * context_ * hd, full.begin() + (g * context_ + std::min(n, slots)) * hd,
                  cache.begin() + (g * slots + slots - std::min(n, slots)) * hd);
    }
  }
  window_ = tokens;
  position_ = n;
  return {};
}

// The window is full: encode its newest half again from position 0.
Result<void> Generator::restart_window() {
  return encode(std::vector<int32_t>(window_.end() - context_ / 2, window_.end()));
}

int32_t Generator::sample(const SamplingOptions& o, uint64_t draw) const {
  std::vector<int32_t> order(static_cast<size_t>(vocab_));
  for (int32_t i = 0; i < int32_t(vocab_); ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits_[size_t(a)] > logits_[size_t(b)]; });
  if (o.temperature <= 0) return order[0];
  const size_t k = o.top_k > 0 ? std::min<size_t>(size_t(o.top_k), order.size()) : order.size();
  std::vector<double> weight(k);
  const double top = logits_[size_t(order[0])];
  double total = 0;
  for (size_t i = 0; i < k; ++i)
    total += weight[i] = std::exp((logits_[size_t(order[i])] - top) / o.temperature);
  double u = data::random_unit(o.seed, data::kSampleStream, draw) * total;
  for (size_t i = 0; i < k; ++i)
    if ((u -= weight[i]) < 0) return order[i];
  return order[k - 1];
}

Result<void> Generator::generate(const std::vector<int32_t>& prompt, int64_t count,
                                 const SamplingOptions& sampling, const std::function<void(int32_t)>& emit) {
  if (prompt.empty()) return make_error("the prompt is empty: give at least one token", TDM_INVALID_ARGUMENT);
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab_)
      return make_error("the prompt has token " + std::to_string(t) + ", outside the model's vocabulary of " +
                            std::to_string(vocab_),
                        TDM_INVALID_ARGUMENT);
  // The prompt's last `context` tokens in one run of the window program.
  const size_t keep = std::min(prompt.size(), size_t(context_));
  if (auto r = encode(std::vector<int32_t>(prompt.end() - keep, prompt.end())); !r) return r.error();
  for (int64_t i = 0; i < count; ++i) {
    const int32_t next = sample(sampling, uint64_t(i));
    emit(next);
    if (i + 1 == count || std::find(sampling.stop_tokens.begin(), sampling.stop_tokens.end(), next) !=
                              sampling.stop_tokens.end())
      break;
    const auto start = std::chrono::steady_clock::now();
    if (auto r = step(next); !r) return r.error();
    token_seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return {};
}

}  // namespace tandem::host::train
