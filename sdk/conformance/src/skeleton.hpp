// `tandem-conformance --new-backend NAME DIR`: a new backend to grow from,
// the SDK's example backend (sdk/examples/hello_backend) renamed. The files
// are compiled into the tool, so it works wherever the tool is installed.
#ifndef TANDEM_CONFORMANCE_SKELETON_HPP
#define TANDEM_CONFORMANCE_SKELETON_HPP

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::conformance {

struct SkeletonFile {
  const char* name;  // as in the example: "hello.cpp" becomes "<name>.cpp"
  const char* text;
};
const std::vector<SkeletonFile>& skeleton_files();

// Writes the renamed files into `dir`, which must not exist yet (it is
// made whole or not at all: written beside it, then renamed into place).
// `name`: the plugin's name, lower case letters, digits and '_', starting
// with a letter; not the name of a plugin in `installed_dirs` (the host
// would refuse it). Returns "" or what went wrong.
std::string write_skeleton(const std::string& name, const std::filesystem::path& dir,
                           const std::vector<std::filesystem::path>& installed_dirs);

}  // namespace tandem::conformance

#endif
