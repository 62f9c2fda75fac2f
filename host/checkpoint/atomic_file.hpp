// Writing a file so that readers see either the old or the new version,
// never a torn one, even across a crash or power loss.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/result.hpp"

namespace tandem::host::checkpoint {

// Writes `parts` one after another to `path`: a temporary file beside it,
// fsync, rename over `path`, fsync of the directory. On any failure the
// temporary file is removed and `path` is untouched.
Result<void> write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts);

}  // namespace tandem::host::checkpoint
