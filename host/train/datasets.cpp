#include "train/datasets.hpp"

#include "data/csv_reader.hpp"
#include "data/idx_reader.hpp"
#include "data/split.hpp"
#include "data/synthetic.hpp"
#include "ops/shapes.hpp"
#include "train/token_datasets.hpp"
#include "util/host_memory.hpp"

namespace tandem::host::train {
namespace {

Result<data::Dataset> load_one(const model::ModelSpec& spec, bool test) {
  const model::DataSpec& d = spec.data;
  if (d.format == "idx")
    return test ? data::load_idx_images(d.test_images, d.test_labels)
                : data::load_idx_images(d.train_images, d.train_labels);
  if (d.format == "csv")
    return data::load_csv(test ? d.test_csv : d.train_csv, {.label_column = static_cast<int>(d.label_column),
                                                            .has_header = d.csv_header,
                                                            .classes = spec.classes});
  data::SyntheticSpec s;
  s.samples = test ? d.synthetic_test_samples : d.synthetic_samples;
  const double bytes = double(s.samples) * double(ops::numel(spec.input_shape)) * sizeof(float);
  if (auto r =
          check_host_memory(bytes >= 1.8e19 ? UINT64_MAX : uint64_t(bytes),
                            "synthetic data of " + std::to_string(s.samples) + " samples of [model] input " +
                                ops::dims_str(spec.input_shape) + " (" + spec.path + ")",
                            "lower [data] synthetic_samples or the input shape");
      !r)
    return r.error();
  s.sample_shape = spec.input_shape;
  s.classes = static_cast<int32_t>(spec.classes > 0 ? spec.classes : 2);
  s.noise = d.synthetic_noise;
  s.vocabulary = d.synthetic_vocab;
  s.seed = spec.train.seed;
  s.first_sample = test ? d.synthetic_samples : 0;  // same classes, other samples
  return data::make_synthetic(s);
}

Result<void> check(const model::ModelSpec& spec, const data::Dataset& set) {
  if (ops::numel(set.sample_shape) != ops::numel(spec.input_shape))
    return make_error(set.source + ": samples have shape " + ops::dims_str(set.sample_shape) + " but " +
                          spec.path + " declares [model] input = " + ops::dims_str(spec.input_shape),
                      TDM_INVALID_ARGUMENT);
  if (spec.classes > 0 && set.num_classes > spec.classes)
    return make_error((set.labels_source.empty() ? set.source : set.labels_source) + ": labels go up to " +
                          std::to_string(set.num_classes - 1) + " but " + spec.path +
                          " declares [model] classes = " + std::to_string(spec.classes),
                      TDM_INVALID_ARGUMENT);
  return {};
}

bool has_test(const model::DataSpec& d) {
  if (d.format == "idx") return !d.test_images.empty() && !d.test_labels.empty();
  if (d.format == "csv") return !d.test_csv.empty();
  return d.synthetic_test_samples > 0;
}

}  // namespace

Result<RunData> load_run_data(const model::ModelSpec& spec) {
  if (!spec.data.given)
    return make_error(spec.path +
                          " has no [data] section, so there is nothing to train or evaluate on: add one "
                          "with format = \"idx\", \"csv\" or \"synthetic\" and its files "
                          "(examples/fmnist_mlp.toml has one)",
                      TDM_INVALID_ARGUMENT);
  if (spec.data.format == "tokens") return load_token_data(spec);
  RunData out;
  auto train = load_one(spec, false);
  if (!train) return train.error();
  if (auto r = check(spec, *train); !r) return r.error();
  train->sample_shape = spec.input_shape;  // e.g. CSV rows [784] as images [1, 28, 28]
  if (spec.data.validation_split > 0) {
    auto [t, v] = data::split_validation(*train, spec.data.validation_split, spec.train.seed);
    out.train = std::move(t);
    out.validation = std::move(v);
  } else {
    out.train = std::move(*train);
  }
  if (has_test(spec.data)) {
    auto test = load_one(spec, true);
    if (!test) return test.error();
    if (auto r = check(spec, *test); !r) return r.error();
    test->sample_shape = spec.input_shape;
    out.test = std::move(*test);
  }
  const auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  out.transforms.mean = to_float(spec.data.normalize_mean);
  out.transforms.std = to_float(spec.data.normalize_std);
  out.transforms.crop_padding = spec.data.random_crop_padding;
  out.transforms.horizontal_flip = spec.data.horizontal_flip;
  return out;
}

}  // namespace tandem::host::train
