// Mistakes in data: [data] values, IDX files and CSV files. Each error
// names the key (file:line:col) or the data file, and what to do.
#include "bad_input.hpp"

namespace tandem::test {
namespace {

const char* const kTrain = "train model.toml --device reference --run-dir run";
const char* const kTrainCsv = "train csv.toml --device reference --run-dir run";

BadInput data_key(const std::string& name, const std::string& from, const std::string& to,
                  std::vector<std::string> says) {
  return {name, kTrain, std::move(says), 4,
          [from, to](const std::string& dir) { write_file(dir + "/model.toml", base_model_with(from, to)); }};
}

// The base model's IDX file `file` replaced by `bytes`.
BadInput idx(const std::string& name, const std::string& file, const std::string& bytes,
             std::vector<std::string> says, int code = 4) {
  return {name, kTrain, std::move(says), code,
          [file, bytes](const std::string& dir) { write_file(dir + "/" + file, bytes); }};
}

// data.csv replaced by `text` (the CSV model: label in column 0, 8 features, 4 classes).
BadInput csv(const std::string& name, const std::string& text, std::vector<std::string> says) {
  return {name, kTrainCsv, std::move(says), 4,
          [text](const std::string& dir) { write_file(dir + "/data.csv", text); }};
}

std::string csv_rows(int rows, const std::string& last) {
  std::string text;
  for (int r = 0; r < rows; ++r) text += std::to_string(r % 4) + ",0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8\n";
  return text + last;
}

std::string with_u32(std::string bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return bytes;
}

class DataFile : public BadInputTest {};

TEST_P(DataFile, IsRefusedClearly) {
  run_bad_input(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    DataSection, DataFile,
    ::testing::Values(
        data_key("format_unknown", "format = \"idx\"", "format = \"parquet\"", {"model.toml:36:", "parquet"}),
        data_key("idx_without_labels", "train_labels = \"train-labels.idx\"\n", "",
                 {"model.toml:", "train_labels"}),
        data_key("horizontal_flip_two", "format = \"idx\"", "format = \"idx\"\nhorizontal_flip = 2.0",
                 {"model.toml:37:", "horizontal_flip"}),
        data_key("crop_padding_negative", "format = \"idx\"", "format = \"idx\"\nrandom_crop_padding = -3",
                 {"model.toml:37:", "random_crop_padding"}),
        data_key("normalize_mean_per_missing_channel", "format = \"idx\"",
                 "format = \"idx\"\nnormalize_mean = [0.1, 0.2, 0.3]", {"model.toml:37:", "normalize_mean"}),
        data_key("normalize_std_zero", "format = \"idx\"", "format = \"idx\"\nnormalize_std = [0.0]",
                 {"model.toml:37:", "normalize_std"}),
        data_key("threads_negative", "format = \"idx\"", "format = \"idx\"\nthreads = -4",
                 {"model.toml:37:", "threads"}),
        data_key("prefetch_zero", "format = \"idx\"", "format = \"idx\"\nprefetch = 0",
                 {"model.toml:37:", "prefetch"}),
        data_key("validation_split_one", "format = \"idx\"", "format = \"idx\"\nvalidation_split = 1.0",
                 {"model.toml:37:", "validation_split"}),
        data_key("unknown_data_key", "format = \"idx\"", "format = \"idx\"\nshuffle = true",
                 {"model.toml:37:", "shuffle"}),
        data_key("synthetic_samples_negative", "format = \"idx\"",
                 "format = \"synthetic\"\nsynthetic_samples = -1", {"model.toml:37:", "synthetic_samples"}),
        data_key("synthetic_noise_negative", "format = \"idx\"",
                 "format = \"synthetic\"\nsynthetic_noise = -1.0", {"model.toml:37:", "synthetic_noise"}),
        data_key("csv_without_file", "format = \"idx\"", "format = \"csv\"", {"model.toml:", "train_csv"}),
        data_key("label_column_negative", "format = \"idx\"", "format = \"idx\"\nlabel_column = -1",
                 {"model.toml:37:", "label_column"}),
        data_key("data_path_a_number", "train_images = \"train-images.idx\"", "train_images = 3",
                 {"model.toml:", "train_images"})),
    CaseName());

INSTANTIATE_TEST_SUITE_P(
    IdxFiles, DataFile,
    ::testing::Values(
        BadInput{"images_missing",
                 kTrain,
                 {"train-images.idx"},
                 4,
                 [](const std::string& dir) { std::remove((dir + "/train-images.idx").c_str()); }},
        BadInput{"labels_missing",
                 kTrain,
                 {"train-labels.idx"},
                 4,
                 [](const std::string& dir) { std::remove((dir + "/train-labels.idx").c_str()); }},
        BadInput{"test_images_missing",
                 kTrain,
                 {"test-images.idx"},
                 4,
                 [](const std::string& dir) { std::remove((dir + "/test-images.idx").c_str()); }},
        idx("images_empty", "train-images.idx", "", {"train-images.idx"}),
        idx("images_header_only", "train-images.idx", idx_images(64, 8, 8).substr(0, 16),
            {"train-images.idx"}),
        idx("images_wrong_magic", "train-images.idx", with_u32(idx_images(64, 8, 8), 0, 0x12340803),
            {"train-images.idx"}),
        idx("images_cut_short", "train-images.idx", idx_images(64, 8, 8).substr(0, 1000),
            {"train-images.idx"}),
        idx("images_of_another_size", "train-images.idx", idx_images(64, 16, 16), {"train-images.idx", "16"}),
        idx("images_claiming_2_34_elements", "train-images.idx", with_u32(idx_images(64, 8, 8), 4, 1u << 28),
            {"train-images.idx"}),
        idx("images_with_a_zero_dimension", "train-images.idx", with_u32(idx_images(64, 8, 8), 8, 0),
            {"train-images.idx"}),
        idx("images_of_no_samples", "train-images.idx", idx_images(0, 8, 8),
            {"train-images.idx", "no samples"}),
        idx("labels_fewer_than_images", "train-labels.idx", idx_labels(60, 4), {"train-labels.idx"}),
        idx("labels_wrong_magic", "train-labels.idx", with_u32(idx_labels(64, 4), 0, 0x00000803),
            {"train-labels.idx"}),
        idx("label_beyond_the_classes", "train-labels.idx", idx_labels(64, 9),
            {"train-labels.idx", "classes"}),
        idx("labels_cut_short", "train-labels.idx", idx_labels(64, 4).substr(0, 30), {"train-labels.idx"}),
        idx("test_labels_beyond_the_classes", "test-labels.idx", idx_labels(16, 7), {"test-labels.idx"}),
        idx("images_gzip_damaged", "train-images.idx", std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03garbage", 17),
            {"train-images.idx"}),
        idx("images_text_file", "train-images.idx", "this is not an IDX file\n", {"train-images.idx"}),
        BadInput{"images_path_a_directory",
                 kTrain,
                 {"train-images.idx", "directory"},
                 4,
                 [](const std::string& dir) {
                   std::remove((dir + "/train-images.idx").c_str());
                   std::filesystem::create_directory(dir + "/train-images.idx");
                 }}),
    CaseName());

INSTANTIATE_TEST_SUITE_P(
    CsvFiles, DataFile,
    ::testing::Values(
        BadInput{"csv_missing",
                 kTrainCsv,
                 {"data.csv"},
                 4,
                 [](const std::string& dir) { std::remove((dir + "/data.csv").c_str()); }},
        csv("csv_nan_feature", csv_rows(3, "1,0.1,nan,0.3,0.4,0.5,0.6,0.7,0.8\n"), {"data.csv:4"}),
        csv("csv_inf_feature", csv_rows(3, "1,0.1,0.2,inf,0.4,0.5,0.6,0.7,0.8\n"), {"data.csv:4"}),
        csv("csv_word_feature", csv_rows(5, "1,0.1,0.2,abc,0.4,0.5,0.6,0.7,0.8\n"), {"data.csv:6"}),
        csv("csv_short_row", csv_rows(2, "1,0.1,0.2\n"), {"data.csv:3"}),
        csv("csv_long_row", csv_rows(2, "1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9\n"), {"data.csv:3"}),
        csv("csv_fractional_label", csv_rows(2, "1.5,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8\n"), {"data.csv:3"}),
        csv("csv_negative_label", csv_rows(2, "-1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8\n"), {"data.csv:3"}),
        csv("csv_label_beyond_the_classes", csv_rows(2, "7,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8\n"),
            {"data.csv:3:1", "4 classes"}),
        csv("csv_empty", "", {"data.csv"}),
        csv("csv_features_not_the_input", "1,0.1,0.2,0.3\n2,0.1,0.2,0.3\n", {"data.csv"}),
        csv("csv_binary", std::string("\0\x01\x02\xff\xfe", 5), {"data.csv"}),
        BadInput{"csv_label_column_outside",
                 kTrainCsv + std::string(" --set data.label_column=20"),
                 {"data.csv"},
                 4,
                 nullptr}),
    CaseName());

}  // namespace
}  // namespace tandem::test
