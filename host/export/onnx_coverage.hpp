// Which catalog ops the ONNX exporter converts, and why it converts none of
// the others (gradient, optimizer and host-run ops aside): what the catalog
// coverage test reads, without the ONNX headers.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::host::exporting {

// The ops with a converter (onnx_ops.hpp), by name.
std::vector<std::string> converted_ops();
// The catalog ops an evaluation graph never holds, each with the reason.
// The coverage test fails on an op that has neither a converter nor a line
// here.
const std::map<std::string_view, std::string_view>& not_exported();

}  // namespace tandem::host::exporting
