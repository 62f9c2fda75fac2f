// TensorBoard's event files, encoded by the project itself (no TensorFlow,
// no protobuf library): TFRecord framing around hand-encoded `Event`
// messages that carry scalar summaries.
//
// A record: uint64 length, masked CRC-32C of those 8 bytes, the data, masked
// CRC-32C of the data (all little-endian). The messages as TensorFlow
// defines them, only the fields written here:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::host::report {

// The protobuf wire format, as much of it as Event needs.
class ProtoWriter {
 public:
  void varint_field(uint32_t field, uint64_t value);     // wire type 0 (int64 as its two's complement)
  void double_field(uint32_t field, double value);       // wire type 1
  void bytes_field(uint32_t field, std::string_view v);  // wire type 2: strings, nested messages
  void float_field(uint32_t field, float value);         // wire type 5
  const std::string& bytes() const { return out_; }

 private:
  void key(uint32_t field, uint32_t wire_type);
  void varint(uint64_t value);
  void little_endian(uint64_t value, int bytes);

  std::string out_;
};

struct Scalar {
  std::string tag;  // "train/loss"
  float value = 0;
};

// One TFRecord around `data`.
std::string tfrecord(std::string_view data);
// The first event of every file: which format the rest is in.
inline constexpr const char* kFileVersion = "brain.Event:2";
std::string file_version_event(double wall_time);
// An Event with a Summary of `scalars` at `step`.
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

}  // namespace tandem::host::report
