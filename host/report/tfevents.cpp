#include "report/tfevents.hpp"

#include <cstring>

#include "report/crc32c.hpp"

namespace tandem::host::report {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Event's and Value's field numbers (tfevents.hpp).
enum EventField : uint32_t { kWallTime = 1, kStep = 2, kFileVersionField = 3, kSummary = 5 };
enum SummaryField : uint32_t { kValue = 1 };
enum ValueField : uint32_t { kTag = 1, kSimpleValue = 2 };

std::string little_endian_bytes(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
  return out;
}

}  // namespace

void ProtoWriter::key(uint32_t field, uint32_t wire_type) {
  varint((uint64_t{field} << 3) | wire_type);
}

void ProtoWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::little_endian(uint64_t value, int bytes) {
  out_ += little_endian_bytes(value, bytes);
}

void ProtoWriter::varint_field(uint32_t field, uint64_t value) {
  key(field, kVarint);
  varint(value);
}

void ProtoWriter::double_field(uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  key(field, kFixed64);
  little_endian(bits, 8);
}

void ProtoWriter::bytes_field(uint32_t field, std::string_view v) {
  key(field, kLengthDelimited);
  varint(v.size());
  out_.append(v);
}

void ProtoWriter::float_field(uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  key(field, kFixed32);
  little_endian(bits, 4);
}

std::string tfrecord(std::string_view data) {
  const std::string length = little_endian_bytes(data.size(), 8);
  std::string out = length;
  out += little_endian_bytes(masked_crc32c(length), 4);
  out.append(data);
  out += little_endian_bytes(masked_crc32c(data), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  ProtoWriter event;
  event.double_field(kWallTime, wall_time);
  event.bytes_field(kFileVersionField, kFileVersion);
  return event.bytes();
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  ProtoWriter summary;
  for (const Scalar& s : scalars) {
    ProtoWriter value;
    value.bytes_field(kTag, s.tag);
    value.float_field(kSimpleValue, s.value);
    summary.bytes_field(kValue, value.bytes());
  }
  ProtoWriter event;
  event.double_field(kWallTime, wall_time);
  event.varint_field(kStep, static_cast<uint64_t>(step));
  event.bytes_field(kSummary, summary.bytes());
  return event.bytes();
}

}  // namespace tandem::host::report
