// Small text helpers shared by the CLI and the loader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::host {

// 1536 -> "1.5 KiB"; binary units, one decimal.
std::string human_bytes(uint64_t bytes);
// 1234.5 -> "1.23 ms", 0.8 -> "0.80 us", 2.5e6 -> "2.50 s".
std::string human_duration_us(double micros);
// Splits "a:b::c" on ':' dropping empty entries (PATH-style lists).
std::vector<std::string> split_path_list(std::string_view list);

}  // namespace tandem::host
