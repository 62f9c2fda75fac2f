// CRC-32C against published check values (the "123456789" check of the
// CRC catalogue, RFC 3720's iSCSI vectors) and against a bitwise
// implementation, and the TFRecord mask.
#include "report/crc32c.hpp"

#include <gtest/gtest.h>

#include <string>

#include "event_file_reader.hpp"

namespace tandem::test {
namespace {

using host::report::crc32c;
using host::report::masked_crc32c;

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(ascending), 0x46dd794eu);
  EXPECT_EQ(crc32c(descending), 0x113fdb5cu);
}

TEST(Crc32c, MatchesABitwiseImplementationOnEveryByteValue) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i * 7 + 3));
  for (size_t n = 0; n <= bytes.size(); n += 17)
    EXPECT_EQ(crc32c(bytes.substr(0, n)), bitwise_crc32c(bytes.substr(0, n))) << n << " bytes";
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  const uint32_t c = 0xe3069283u;  // crc32c("123456789")
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);  // the CRC of nothing is 0
}

}  // namespace
}  // namespace tandem::test
