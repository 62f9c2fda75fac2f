// TFRecord framing and hand-encoded Event messages, decoded again by the
// tests' own reader (event_file_reader.hpp), plus the exact bytes of the
// first event, and the writer's file in a directory.
#include "report/tfevents.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "event_file_reader.hpp"
#include "report/tensorboard_writer.hpp"
#include "temp_dir.hpp"

namespace tandem::test {
namespace {

namespace report = host::report;

TEST(TfRecord, FramesLengthAndDataWithMaskedCrcs) {
  const std::string record = report::tfrecord("hello");
  ASSERT_EQ(record.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(little_endian(std::string_view(record).substr(0, 8)), 5u);
  EXPECT_EQ(little_endian(std::string_view(record).substr(8, 4)), bitwise_masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 5), "hello");
  EXPECT_EQ(little_endian(std::string_view(record).substr(17, 4)), bitwise_masked_crc32c("hello"));
  const auto records = read_records(record + report::tfrecord("") + report::tfrecord(std::string(300, 'x')));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1], "");
  EXPECT_EQ(records[2], std::string(300, 'x'));
}

// Event { wall_time (field 1, fixed64) = 0.0; file_version (field 3) = "brain.Event:2" }.
TEST(TfEvents, FileVersionEventBytes) {
  const std::string expected = std::string("\x09", 1) + std::string(8, '\0') + "\x1a\x0d" + "brain.Event:2";
  EXPECT_EQ(report::file_version_event(0.0), expected);
  const DecodedEvent e = decode_event(report::file_version_event(1700000000.25));
  EXPECT_EQ(e.wall_time, 1700000000.25);
  EXPECT_EQ(e.file_version, "brain.Event:2");
  EXPECT_TRUE(e.values.empty());
}

TEST(TfEvents, ScalarsEventDecodes) {
  const std::string long_tag = "eval/" + std::string(200, 'a');  // a length of two varint bytes
  const std::string data =
      report::scalars_event(12.5, 300, {{"train/loss", 0.6931f}, {"lr", 1e-4f}, {long_tag, -2.5f}});
  const DecodedEvent e = decode_event(data);
  EXPECT_EQ(e.wall_time, 12.5);
  EXPECT_EQ(e.step, 300);
  EXPECT_EQ(e.file_version, "");
  ASSERT_EQ(e.values.size(), 3u);
  EXPECT_EQ(e.values[0].tag, "train/loss");
  EXPECT_EQ(e.values[0].simple_value, 0.6931f);
  EXPECT_EQ(e.values[1].tag, "lr");
  EXPECT_EQ(e.values[1].simple_value, 1e-4f);
  EXPECT_EQ(e.values[2].tag, long_tag);
  EXPECT_EQ(e.values[2].simple_value, -2.5f);
}

TEST(TfEvents, StepsBeyondOneVarintByteAndNegative) {
  for (int64_t step : {int64_t{0}, int64_t{127}, int64_t{128}, int64_t{1} << 40, int64_t{-1}})
    EXPECT_EQ(decode_event(report::scalars_event(0, step, {{"x", 1}})).step, step) << step;
}

TEST(TensorBoardWriter, WritesAFileOfVersionThenScalarEvents) {
  TempDir dir;
  const std::string tb = dir.file("tb/nested");  // created as needed
  auto writer = report::TensorBoardWriter::open(tb);
  ASSERT_TRUE(writer) << writer.error().message;
  (*writer)->write(1, {{"train/loss", 1.5f}});
  (*writer)->write(2, {{"train/loss", 1.25f}, {"lr", 0.1f}});
  (*writer)->write(3, {});  // nothing to say: no event
  EXPECT_FALSE((*writer)->error());
  const std::string name = std::filesystem::path((*writer)->path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  std::ifstream in((*writer)->path(), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const auto records = read_records(bytes.str());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(decode_event(records[0]).file_version, "brain.Event:2");
  const DecodedEvent second = decode_event(records[2]);
  EXPECT_EQ(second.step, 2);
  ASSERT_EQ(second.values.size(), 2u);
  EXPECT_EQ(second.values[1].tag, "lr");
  // A second writer in the same second gets a file of its own.
  auto other = report::TensorBoardWriter::open(tb);
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_NE((*other)->path(), (*writer)->path());
}

TEST(TensorBoardWriter, RefusesADirectoryBelowAFile) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  auto writer = report::TensorBoardWriter::open(dir.file("file/tb"));
  ASSERT_FALSE(writer);
  EXPECT_NE(writer.error().message.find(dir.file("file/tb")), std::string::npos) << writer.error().message;
  EXPECT_NE(writer.error().message.find("cannot create the directory"), std::string::npos)
      << writer.error().message;
}

}  // namespace
}  // namespace tandem::test
