#include "skeleton.hpp"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <system_error>

namespace fs = std::filesystem;

namespace tandem::conformance {
namespace {

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// "my_backend" -> "MyBackend": the example's class names (HelloDevice).
std::string camel_case(const std::string& name) {
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

std::string valid_name(const std::string& name) {
  if (name.empty() || name.size() > 32 || !std::islower(static_cast<unsigned char>(name[0])))
    return "'" + name + "': a plugin name starts with a lower-case letter and has at most 32 characters";
  for (char c : name)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '_'))
      return "'" + name +
             "': a plugin name has lower-case letters, digits and '_' only (it names devices: " + "NAME:0)";
  return "";
}

}  // namespace

std::string write_skeleton(const std::string& name, const fs::path& dir,
                           const std::vector<fs::path>& installed_dirs) {
  if (std::string bad = valid_name(name); !bad.empty()) return bad;
  std::error_code ec;
  for (const fs::path& installed : installed_dirs)
    if (fs::exists(installed / ("libtandem-" + name + ".so"), ec))
      return "'" + name + "' is the name of the installed plugin " +
             (installed / ("libtandem-" + name + ".so")).string() +
             "; the host would refuse a second one: choose another name";
  if (fs::exists(dir, ec)) return dir.string() + " exists already: give a new directory";
  const fs::path parent = fs::absolute(dir, ec).parent_path();
  if (ec || !fs::is_directory(parent, ec)) return "the directory " + parent.string() + " does not exist";
  const fs::path staging = parent / ("." + dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec)) return "cannot create " + staging.string() + ": " + ec.message();
  for (const SkeletonFile& f : skeleton_files()) {
    const std::string file = replace_all(f.name, "hello", name);
    std::string text = replace_all(replace_all(f.text, "Hello", camel_case(name)), "hello", name);
    std::ofstream out(staging / file, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
      fs::remove_all(staging, ec);
      return "cannot write " + (staging / file).string();
    }
  }
  fs::rename(staging, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove_all(staging, ec);
    return "cannot create " + dir.string() + ": " + why;
  }
  return "";
}

}  // namespace tandem::conformance
