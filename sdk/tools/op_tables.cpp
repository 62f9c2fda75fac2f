// tandem-op-tables — sdk/ops.md's reference tables, written from the op
// catalog (tandem/op_catalog.hpp) so the document cannot drift from it.
//
//   tandem-op-tables                 print the tables
//   tandem-op-tables --check FILE    exit 1, naming the table, when FILE's differ
//   tandem-op-tables --write FILE    replace FILE's tables (temporary file, rename)
//
// Each table sits between "<!-- catalog:NAME -->" and "<!-- /catalog:NAME -->".
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tandem/op_catalog.hpp"

namespace {

namespace catalog = tandem::catalog;

std::string or_dash(const std::string& s) {
  return s.empty() ? "—" : s;
}

// "@conv2d, has_bias int(1)" -> "as conv2d, has_bias int(1)"; in-place
// pairs appended as "in-place: out 0 = in 2".
std::string attributes(const catalog::Op& op) {
  std::string s;
  for (const std::string& part : catalog::detail::split(op.entry->attrs, ','))
    s += (s.empty() ? "" : ", ") + (part.starts_with('@') ? "as " + part.substr(1) : part);
  std::string pairs;
  for (const catalog::InplacePair& p : op.inplace)
    pairs += (pairs.empty() ? "" : ", ") + std::string("out ") + std::to_string(p.out) + " = in " +
             std::to_string(p.in) + (p.always ? " (always)" : "");
  if (!pairs.empty()) s = or_dash(s) + "; in-place: " + pairs;
  return or_dash(s);
}

std::string amp_class(const catalog::Op& op) {
  switch (op.entry->amp) {
    case catalog::Amp::low:
      return "bf16/f16";
    case catalog::Amp::bf16:
      return "bf16";
    case catalog::Amp::f32:
      return "f32";
    case catalog::Amp::unset:
      break;
  }
  return "?";
}

std::string signatures() {
  std::string t =
      "| op | inputs | outputs | attributes (default: valid values) | dtypes | under amp |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const catalog::Op& op : catalog::ops())
    t += "| " + op.name + " | " + or_dash(std::string(op.entry->inputs)) + " | " +
         std::string(op.entry->outputs) + " | " + attributes(op) + " | " + std::string(op.entry->dtypes) +
         " | " + amp_class(op) + " |\n";
  return t;
}

std::string sections() {
  std::vector<std::string> order;
  std::map<std::string, std::string> members;
  for (const catalog::Op& op : catalog::ops()) {
    if (members.count(op.section) == 0) order.push_back(op.section);
    std::string& list = members[op.section];
    list += (list.empty() ? "" : ", ") + op.name;
  }
  std::string t = "| section | file stem |\n| --- | --- |\n";
  for (const std::string& stem : order) t += "| " + members[stem] + " | `" + stem + "` |\n";
  return t;
}

const std::vector<std::pair<std::string, std::string>>& tables() {
  static const std::vector<std::pair<std::string, std::string>> t = {{"signatures", signatures()},
                                                                     {"sections", sections()}};
  return t;
}

// `text` with each table's block replaced; `stale` collects the names of
// those that differed.
std::string with_tables(const std::string& text, std::vector<std::string>& stale, const std::string& file) {
  std::string out = text;
  for (const auto& [name, table] : tables()) {
    const std::string open = "<!-- catalog:" + name + " -->\n", close = "<!-- /catalog:" + name + " -->";
    const size_t a = out.find(open), b = out.find(close);
    if (a == std::string::npos || b == std::string::npos || b < a)
      throw std::runtime_error(file + ": no '" + open.substr(0, open.size() - 1) + "' ... '" + close +
                               "' block for the " + name + " table");
    const size_t start = a + open.size();
    if (out.compare(start, b - start, table) != 0) stale.push_back(name);
    out.replace(start, b - start, table);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode.empty()) {
      for (const auto& [name, table] : tables()) std::cout << table << "\n";
      return 0;
    }
    if ((mode != "--check" && mode != "--write") || argc != 3) {
      std::cerr << "usage: tandem-op-tables [--check FILE | --write FILE]\n";
      return 2;
    }
    const std::string file = argv[2];
    std::ifstream in(file);
    if (!in) throw std::runtime_error(file + ": cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> stale;
    const std::string updated = with_tables(text.str(), stale, file);
    if (mode == "--check") {
      for (const std::string& name : stale)
        std::cerr << file << ": the " << name
                  << " table differs from the op catalog; run tandem-op-tables --write " << file << "\n";
      return stale.empty() ? 0 : 1;
    }
    // A temporary file renamed over FILE: a failed write leaves FILE as it was.
    const std::string temporary = file + ".tmp";
    std::ofstream out(temporary);
    out << updated;
    out.close();
    if (!out || std::rename(temporary.c_str(), file.c_str()) != 0) {
      std::remove(temporary.c_str());
      throw std::runtime_error(file + ": cannot be replaced (writing " + temporary + " failed)");
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tandem-op-tables: " << e.what() << "\n";
    return 1;
  }
}
