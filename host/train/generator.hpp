// Text generation from a trained language model (`tandem generate`): the
// model's decode program (lowering Mode::Decode) runs once per token, and
// the keys and values of the tokens before it come from a cache kept here,
// so a token costs the same however long the text has grown. The window
// is the model's context: when it is full, its newest half is encoded again
// at positions from 0 (a learned position table has no rows past the
// context) by one run of the whole-window evaluation program, which also
// reads the prompt, and generation goes on from there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "lowering/int8_plan.hpp"
#include "model/model_spec.hpp"
#include "program/program.hpp"

namespace tandem::host::train {

struct SamplingOptions {
  double temperature = 0.8;  // 0: always the most likely token
  int64_t top_k = 0;         // sample among the k most likely (0: all)
  uint64_t seed = 0;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one (the tokenizer's eos)
};

class Generator {
 public:
  // The decode program of `spec` on `device`, with the parameters of `cp`
  // (and its INT8 layers when `int8` is given).
  static Result<std::unique_ptr<Generator>> create(const model::ModelSpec& spec, const DeviceHandle& device,
                                                   const PluginRegistry& registry,
                                                   const checkpoint::Checkpoint& cp,
                                                   const std::string& source, const lowering::Int8Plan* int8);

  // Feeds the prompt, then samples `count` tokens, calling `emit` with each
  // as soon as it is drawn; fewer when one of sampling.stop_tokens is drawn.
  Result<void> generate(const std::vector<int32_t>& prompt, int64_t count, const SamplingOptions& sampling,
                        const std::function<void(int32_t)>& emit);

  // The logits [vocab] after feeding `token` at the next position (public
  // for tests, which compare them with a whole-window forward).
  Result<const std::vector<float>*> step(int32_t token);

  // Seconds spent in step() for the tokens generated (not the prompt).
  const std::vector<double>& token_seconds() const noexcept { return token_seconds_; }

 private:
  Generator(const model::ModelSpec& spec, std::unique_ptr<program::Program> program,
            std::unique_ptr<program::Program> window);
  // Encodes `tokens` (at most the context) at positions 0, 1, ... in one
  // run: the cache holds their keys and values, logits_ the last one's.
  Result<void> encode(const std::vector<int32_t>& tokens);
  Result<void> restart_window();
  int32_t sample(const SamplingOptions& o, uint64_t draw) const;

  std::unique_ptr<program::Program> program_;         // decode: one token
  std::unique_ptr<program::Program> window_program_;  // evaluation of a whole window, sharing the parameters
  int64_t context_ = 0, vocab_ = 0;
  int64_t position_ = 0;                  // of the next token within the window
  std::vector<int32_t> window_;           // the tokens fed since the window began
  std::vector<std::vector<float>> keys_;  // per attention layer: [G, context - 1, head_dim], right-aligned
  std::vector<std::vector<float>> values_;
  std::vector<float> logits_, fresh_;
  std::vector<uint8_t> mask_;
  std::vector<double> token_seconds_;
};

}  // namespace tandem::host::train
