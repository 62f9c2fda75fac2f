// A reader of TensorBoard event files for the tests, written apart from
// host/report/ (its own bitwise CRC-32C, its own protobuf decoding) so that
// a mistake in the writer does not cancel out in the check.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::test {

inline uint32_t bitwise_crc32c(std::string_view bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline uint32_t bitwise_masked_crc32c(std::string_view bytes) {
  const uint32_t crc = bitwise_crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline uint64_t little_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

// The records' data, each checked against both its CRCs (a failure of the
// test names the record).
inline std::vector<std::string> read_records(std::string_view file) {
  std::vector<std::string> records;
  while (!file.empty()) {
    if (file.size() < 12) {
      ADD_FAILURE() << "record " << records.size() << ": " << file.size() << " bytes left, a header needs 12";
      break;
    }
    const uint64_t length = little_endian(file.substr(0, 8));
    EXPECT_EQ(little_endian(file.substr(8, 4)), bitwise_masked_crc32c(file.substr(0, 8)))
        << "record " << records.size() << ": the length's CRC";
    if (file.size() < 16 + length) {
      ADD_FAILURE() << "record " << records.size() << " of " << length << " bytes is cut short";
      break;
    }
    const std::string_view data = file.substr(12, length);
    EXPECT_EQ(little_endian(file.substr(12 + length, 4)), bitwise_masked_crc32c(data))
        << "record " << records.size() << ": the data's CRC";
    records.emplace_back(data);
    file.remove_prefix(16 + length);
  }
  return records;
}

struct DecodedValue {
  std::string tag;
  float simple_value = 0;
};

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<DecodedValue> values;
};

// Protobuf fields of one message: (field number, wire type, varint or the
// bytes of a fixed/length-delimited field).
struct ProtoField {
  uint32_t number = 0, wire = 0;
  uint64_t varint = 0;
  std::string bytes;
};

inline uint64_t read_varint(std::string_view& in) {
  uint64_t v = 0;
  for (int shift = 0; !in.empty() && shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= uint64_t(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  ADD_FAILURE() << "a varint runs past the end of its message";
  return v;
}

inline std::vector<ProtoField> read_fields(std::string_view in) {
  std::vector<ProtoField> fields;
  while (!in.empty()) {
    ProtoField f;
    const uint64_t key = read_varint(in);
    f.number = static_cast<uint32_t>(key >> 3), f.wire = static_cast<uint32_t>(key & 7);
    const size_t fixed = f.wire == 1 ? 8 : f.wire == 5 ? 4 : 0;
    if (f.wire == 0) {
      f.varint = read_varint(in);
    } else if (fixed > 0 || f.wire == 2) {
      const size_t n = fixed > 0 ? fixed : static_cast<size_t>(read_varint(in));
      if (n > in.size()) {
        ADD_FAILURE() << "field " << f.number << " runs past the end of its message";
        break;
      }
      f.bytes = std::string(in.substr(0, n));
      in.remove_prefix(n);
    } else {
      ADD_FAILURE() << "field " << f.number << " has wire type " << f.wire << ", which Event never uses";
      break;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

inline DecodedEvent decode_event(std::string_view data) {
  DecodedEvent e;
  for (const ProtoField& f : read_fields(data)) {
    if (f.number == 1 && f.wire == 1) std::memcpy(&e.wall_time, f.bytes.data(), 8);
    if (f.number == 2 && f.wire == 0) e.step = static_cast<int64_t>(f.varint);
    if (f.number == 3 && f.wire == 2) e.file_version = f.bytes;
    if (f.number != 5 || f.wire != 2) continue;
    for (const ProtoField& value : read_fields(f.bytes)) {
      EXPECT_EQ(value.number, 1u) << "a Summary holds only values (field 1)";
      DecodedValue v;
      for (const ProtoField& part : read_fields(value.bytes)) {
        if (part.number == 1 && part.wire == 2) v.tag = part.bytes;
        if (part.number == 2 && part.wire == 5) std::memcpy(&v.simple_value, part.bytes.data(), 4);
      }
      e.values.push_back(v);
    }
  }
  return e;
}

}  // namespace tandem::test
