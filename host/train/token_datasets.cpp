// A language model's data sets ([data] format = "tokens"): the training
// stream, and the validation stream from val_tokens or the tail of the
// training file (validation_split), contiguous so that no validation window
// overlaps a training one.
#include "train/token_datasets.hpp"

#include <algorithm>

namespace tandem::host::train {
namespace {

data::Dataset token_set(data::TokenStream stream, const std::string& source, int64_t context, int64_t windows,
                        bool random, int32_t classes) {
  data::Dataset d;
  d.source = source;
  d.sample_shape = {context};
  d.context = context;
  d.random_windows = random;
  // Evaluation reads consecutive windows; each needs context + 1 tokens.
  d.windows = random ? windows : (stream.size() - 1) / context;
  d.num_classes = classes;
  d.tokens = std::make_shared<const data::TokenStream>(std::move(stream));
  return d;
}

}  // namespace

Result<RunData> load_token_data(const model::ModelSpec& spec) {
  const model::DataSpec& d = spec.data;
  const int64_t context = spec.input_shape.at(0), vocab = spec.classes;
  const int width = data::token_width(d.token_dtype);
  uint32_t largest = 0;
  auto train = data::read_token_file(d.train_tokens, width, context, vocab, &largest);
  if (!train) return train.error();
  RunData out;
  data::TokenStream whole = *train;
  std::optional<data::TokenStream> validation;
  std::string validation_source = d.val_tokens;
  if (!d.val_tokens.empty()) {
    auto v = data::read_token_file(d.val_tokens, width, context, vocab, nullptr);
    if (!v) return v.error();
    validation = *v;
  } else if (d.validation_split > 0) {
    const int64_t held = std::max<int64_t>(context + 1, int64_t(double(whole.size()) * d.validation_split));
    if (whole.size() - held < context + 1)
      return make_error(d.train_tokens + ": " + std::to_string(whole.size()) +
                            " tokens leave no training window after validation_split: lower it",
                        TDM_INVALID_ARGUMENT);
    validation = whole.slice(whole.size() - held, whole.size());
    validation_source = d.train_tokens + " (the last " + std::to_string(held) + " tokens)";
    whole = whole.slice(0, whole.size() - held);
  }
  const int64_t windows =
      d.windows_per_epoch > 0 ? d.windows_per_epoch : std::max<int64_t>(1, whole.size() / context);
  out.train = token_set(whole, d.train_tokens, context, windows, true, int32_t(largest) + 1);
  if (validation) out.validation = token_set(*validation, validation_source, context, 0, false, 0);
  return out;
}

}  // namespace tandem::host::train
