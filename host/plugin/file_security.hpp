// Refuses plugin files other users could replace (sdk/ABI.md rule 11): a plugin
// runs with the user's rights, so a file or directory writable by group or
// others is a way for someone else to run code as this user.
#pragma once

#include <filesystem>

#include "util/result.hpp"

namespace tandem::host {

// OK when neither `file` nor its directory is writable by group or others.
// The error names the writable path, its mode and both ways out.
Result<void> check_not_writable_by_others(const std::filesystem::path& file);

}  // namespace tandem::host
