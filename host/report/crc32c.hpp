// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum of
// TFRecord framing, and TensorFlow's "masked" form of it: a CRC stored next
// to the bytes it covers is masked so that a CRC of data holding CRCs stays
// well distributed.
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem::host::report {

// crc32c("123456789") == 0xe3069283.
uint32_t crc32c(std::string_view bytes);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8, as TFRecord readers expect.
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace tandem::host::report
