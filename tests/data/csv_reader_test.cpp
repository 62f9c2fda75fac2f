#include "data/csv_reader.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "temp_dir.hpp"

namespace tandem::host::data {
namespace {

TEST(CsvReader, ReadsLabelAndFeatures) {
  test::TempDir dir;
  std::ofstream(dir.file("d.csv")) << "label,x,y\n1, 0.5, 2\n0,1e-3,-4\n2,3,3\n";
  auto set = load_csv(dir.file("d.csv"), {.label_column = 0, .has_header = true});
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->size(), 3);
  EXPECT_EQ(set->num_classes, 3);
  EXPECT_EQ(set->sample_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(set->labels, (std::vector<int32_t>{1, 0, 2}));
  EXPECT_FLOAT_EQ(set->features[2], 1e-3f);
}

TEST(CsvReader, BadCellNamesLineAndColumn) {
  test::TempDir dir;
  std::ofstream(dir.file("bad.csv")) << "1,2,3\n0,abc,1\n";
  auto set = load_csv(dir.file("bad.csv"), {.label_column = -1});
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.error().message.find("bad.csv:2:2: 'abc' is not a number"), std::string::npos)
      << set.error().message;
}

TEST(CsvReader, RaggedRowIsAnError) {
  test::TempDir dir;
  std::ofstream(dir.file("r.csv")) << "1,2,3\n0,1\n";
  auto set = load_csv(dir.file("r.csv"), {});
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.error().message.find("r.csv:2: 2 columns, expected 3"), std::string::npos)
      << set.error().message;
}

TEST(CsvReader, FractionalLabelIsAnError) {
  test::TempDir dir;
  std::ofstream(dir.file("l.csv")) << "0.5,2,3\n";
  auto set = load_csv(dir.file("l.csv"), {});
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.error().message.find("is not a class index"), std::string::npos) << set.error().message;
}

// Found by tests/fuzz (csv_fuzzer): the label was cast to int32 before its
// range was checked (undefined beyond int32), and the largest int32 label
// made num_classes overflow.
TEST(CsvReader, LabelBeyondTheClassLimitIsAnErrorNotUndefined) {
  for (const char* label : {"2744183646", "2147483647", "1e10", "1000001"}) {
    std::istringstream in(std::string(label) + ",1,2\n");
    auto set = parse_csv(in, "big.csv", {});
    ASSERT_FALSE(set.ok()) << label;
    EXPECT_NE(
        set.error().message.find("big.csv:1:1: label '" + std::string(label) + "' is not a class index"),
        std::string::npos)
        << set.error().message;
  }
  std::istringstream largest("1000000,1,2\n");
  auto set = parse_csv(largest, "largest.csv", {});
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->num_classes, kMaxLabel + 1);
}

}  // namespace
}  // namespace tandem::host::data
