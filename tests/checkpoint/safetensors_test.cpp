#include "checkpoint/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "temp_dir.hpp"

namespace tandem::host::checkpoint {
namespace {

TensorRecord f32_tensor(const std::string& name, std::vector<int64_t> shape, float start) {
  TensorRecord t{name, TDM_F32, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.data.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = start + static_cast<float>(i);
    std::memcpy(t.data.data() + i * 4, &v, 4);
  }
  return t;
}

Checkpoint sample() {
  Checkpoint cp;
  cp.metadata["tandem.step"] = "42";
  cp.tensors.push_back(f32_tensor("fc1.weight", {3, 4}, 1.f));
  cp.tensors.push_back(f32_tensor("fc1.bias", {3}, -1.f));
  return cp;
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  test::TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("a.safetensors"), sample()).ok());
  auto cp = read_safetensors(dir.file("a.safetensors"));
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  EXPECT_EQ(cp->metadata.at("tandem.step"), "42");
  ASSERT_NE(cp->find("fc1.weight"), nullptr);
  EXPECT_EQ(cp->find("fc1.weight")->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(cp->find("fc1.bias")->data, sample().tensors[1].data);
}

TEST(Safetensors, HeaderFollowsTheSpecification) {
  test::TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("a.safetensors"), sample()).ok());
  std::ifstream in(dir.file("a.safetensors"), std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  EXPECT_NE(header.find("\"fc1.weight\":{\"data_offsets\":[0,48],\"dtype\":\"F32\",\"shape\":[3,4]}"),
            std::string::npos)
      << header;
}

TEST(Safetensors, CorruptedTensorIsRefusedByName) {
  test::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  const auto size = std::filesystem::file_size(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size - 2));  // inside fc1.bias, the last tensor
  f.put('\x7f');
  f.close();
  auto cp = read_safetensors(path);
  ASSERT_FALSE(cp.ok());
  EXPECT_NE(cp.error().message.find("tensor 'fc1.bias' failed its checksum"), std::string::npos)
      << cp.error().message;
}

TEST(Safetensors, TruncatedFileIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("t.safetensors");
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  auto cp = read_safetensors(path);
  ASSERT_FALSE(cp.ok());
  EXPECT_NE(cp.error().message.find("points outside the file"), std::string::npos) << cp.error().message;
}

// A header that is not JSON is named by the byte of the file where it
// breaks and what stood there, in the project's words, not the JSON
// library's.
TEST(Safetensors, AHeaderThatIsNotJsonIsNamedWithTheByteWhereItBreaks) {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekp(8 + 1);  // the header's second character, the first key's opening quote
  file.put(':');
  file.close();
  auto cp = read_safetensors(path);
  ASSERT_FALSE(cp.ok());
  const std::string& m = cp.error().message;
  EXPECT_NE(m.find(path + ": not a valid safetensors checkpoint"), std::string::npos) << m;
  EXPECT_NE(m.find("not valid JSON at byte 9 of the file: ':' after '{', where a JSON value, a string key"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("parse_error"), std::string::npos) << m;  // nlohmann's own text
  EXPECT_EQ(m.find("[json.exception"), std::string::npos) << m;

  // A complete object with something after it.
  {
    std::fstream again(path, std::ios::binary | std::ios::in | std::ios::out);
    again.seekp(8 + 1);
    again.put('}');
  }
  auto trailing = read_safetensors(path);
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(
      trailing.error().message.find("at byte 10 of the file: '_' after '{}', where the end of the header"),
      std::string::npos)
      << trailing.error().message;

  // Valid JSON syntax with a number no double holds (found by the fuzzer).
  {
    std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[41e400],\"data_offsets\":[0,4]}}";
    std::string file(8, '\0');
    file[0] = static_cast<char>(header.size());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << file << header << std::string(4, '\0');
  }
  auto huge = read_safetensors(path);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("holds a number too large for a double"), std::string::npos)
      << huge.error().message;

  // Cut inside the header: its JSON ends early.
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[0] = 20;  // the header length: 20 bytes, inside the first entry
  for (int i = 1; i < 8; ++i) bytes[size_t(i)] = 0;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto cut = read_safetensors(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("ends inside a value at byte 28 of the file"), std::string::npos)
      << cut.error().message;
}

TEST(Safetensors, FailedWriteLeavesThePreviousFileIntact) {
  test::TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  ASSERT_TRUE(write_safetensors(path, sample()).ok());
  Checkpoint bad = sample();
  bad.tensors[0].data.pop_back();  // size no longer matches the shape
  EXPECT_FALSE(write_safetensors(path, bad).ok());
  auto cp = read_safetensors(path);
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  EXPECT_EQ(cp->find("fc1.weight")->data, sample().tensors[0].data);
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "temporary file left behind";
}

TEST(Safetensors, UnwritableDirectoryIsAClearError) {
  auto r = write_safetensors("/nonexistent-dir/x.safetensors", sample());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent-dir/x.safetensors: cannot create a temporary file"),
            std::string::npos)
      << r.error().message;
}

// A file of one tensor "w" whose header entry is `entry` (JSON), then
// `data_bytes` zero bytes of data.
std::string one_tensor_file(const std::string& entry, size_t data_bytes) {
  std::string header = "{\"w\":" + entry + "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return file + header + std::string(data_bytes, '\0');
}

std::string error_of(const std::string& file) {
  auto cp = parse_safetensors(file, "x.safetensors");
  return cp.ok() ? "(loaded)" : cp.error().message;
}

// Found while writing tests/fuzz/safetensors_fuzzer.cpp (its promise "the
// bytes match the shape and dtype"; corpus/safetensors/regression_negative_*):
// a shape of [-1] passed the size check for an end offset near 2^64, whose
// sum with the data start wrapped inside the file, and the reader copied
// 2^64 - 4 bytes; [-2, -1] loaded as a tensor of a negative shape.
TEST(Safetensors, NegativeDimensionsAndWrappingOffsetsAreRefused) {
  EXPECT_NE(
      error_of(one_tensor_file(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,18446744073709551612]})", 8))
          .find("tensor 'w' points outside the file"),
      std::string::npos);
  EXPECT_NE(error_of(one_tensor_file(R"({"dtype":"F32","shape":[-2,-1],"data_offsets":[0,8]})", 8))
                .find("tensor 'w' has a negative dimension -2"),
            std::string::npos);
}

// A shape whose element count overflows (signed overflow, undefined; it
// wrapped to 0 and matched an empty tensor; regression_shape_overflow), and
// numbers that are not integers: nlohmann's cast of 1e300 to an integer is
// undefined (the fuzzer found a float data_offsets; regression_float_offset).
TEST(Safetensors, ShapesThatOverflowOrAreNotIntegersAreRefused) {
  EXPECT_NE(
      error_of(one_tensor_file(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]})", 0))
          .find("tensor 'w' has a size that does not match its shape"),
      std::string::npos);
  EXPECT_NE(error_of(one_tensor_file(R"({"dtype":"F32","shape":[1e300],"data_offsets":[0,4]})", 4))
                .find("tensor 'w' has a shape or data_offsets that is not a list of integers"),
            std::string::npos);
  EXPECT_EQ(error_of(one_tensor_file(R"({"dtype":"F32","shape":[0,7],"data_offsets":[0,0]})", 0)),
            "(loaded)");
}

}  // namespace
}  // namespace tandem::host::checkpoint
