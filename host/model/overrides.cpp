#include "model/overrides.hpp"

#include <algorithm>

#include <sstream>

namespace tandem::host::model {
namespace {

std::vector<std::string> split_dots(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  return parts;
}

// The value as TOML, or as a bare string when it is not TOML.
toml::table parse_value(const std::string& text) {
  try {
    toml::table t = toml::parse("v = " + text);
    return t;
  } catch (const toml::parse_error&) {
    toml::table t;
    t.insert("v", text);
    return t;
  }
}

// The layer called `name` in `where`'s array `list` ("layers" of the file,
// "body" of a repeat block).
toml::table* find_layer(toml::table& where, const char* list, const std::string& name) {
  toml::array* layers = where[list].as_array();
  if (layers == nullptr) return nullptr;
  for (auto& node : *layers) {
    toml::table* t = node.as_table();
    if (t != nullptr && t->get("name") != nullptr && t->get("name")->value<std::string>() == name) return t;
  }
  return nullptr;
}

void record(const toml::node& node, const std::string& assignment,
            std::map<const toml::node*, std::string>& origins) {
  origins[&node] = assignment;
  if (const toml::array* a = node.as_array())
    for (const toml::node& e : *a) record(e, assignment, origins);
  if (const toml::table* t = node.as_table())
    for (const auto& [key, value] : *t) record(value, assignment, origins);
}

Result<void> apply_one(toml::table& doc, const std::string& assignment,
                       std::map<const toml::node*, std::string>& origins) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return make_error("--set " + assignment + ": expected KEY=VALUE, e.g. --set train.lr=0.1",
                      TDM_INVALID_ARGUMENT);
  const std::vector<std::string> path = split_dots(assignment.substr(0, eq));
  // A model file's keys are at most three deep (train.lr,
  // features.amp.dtype, layers.fc1.out_features), four for a layer in a
  // repeat block's body (layers.h.attn.dropout: every copy of the block);
  // a longer path names nothing, and building its empty sections only
  // costs time.
  const size_t deepest = !path.empty() && path[0] == "layers" ? 4 : 3;
  if (path.size() > deepest || std::find(path.begin(), path.end(), std::string()) != path.end())
    return make_error("--set " + assignment.substr(0, std::min<size_t>(eq, 80)) + (eq > 80 ? "...=" : "=") +
                          ": not a key of a model file (SECTION.KEY, features.NAME.KEY, layers.NAME.KEY "
                          "or layers.BLOCK.NAME.KEY, e.g. --set train.lr=0.1)",
                      TDM_INVALID_ARGUMENT);
  toml::table* table = &doc;
  size_t i = 0;
  if (path.size() >= 3 && path[0] == "layers") {
    table = find_layer(doc, "layers", path[1]);
    if (table == nullptr)
      return make_error("--set " + assignment + ": no layer named '" + path[1] + "' in the model file",
                        TDM_INVALID_ARGUMENT);
    i = 2;
    if (path.size() == 4) {
      table = find_layer(*table, "body", path[2]);
      if (table == nullptr)
        return make_error("--set " + assignment + ": no layer named '" + path[2] + "' in the body of '" +
                              path[1] + "' (a repeat block's layers are BLOCK.NAME)",
                          TDM_INVALID_ARGUMENT);
      i = 3;
    }
  }
  for (; i + 1 < path.size(); ++i) {
    toml::node* next = table->get(path[i]);
    if (next == nullptr) {  // a section the override creates is the override's
      next = &table->insert_or_assign(path[i], toml::table{}).first->second;
      origins[next] = assignment;
    }
    if (!next->is_table())
      return make_error("--set " + assignment + ": '" + path[i] + "' is not a section", TDM_INVALID_ARGUMENT);
    table = next->as_table();
  }
  if (path.empty() || path.back().empty())
    return make_error("--set " + assignment + ": empty key", TDM_INVALID_ARGUMENT);
  toml::table parsed = parse_value(assignment.substr(eq + 1));
  const auto placed = table->insert_or_assign(path.back(), std::move(*parsed.get("v")));
  record(placed.first->second, assignment, origins);
  return {};
}

}  // namespace

Result<void> apply_overrides(toml::table& doc, const std::vector<std::string>& overrides,
                             std::map<const toml::node*, std::string>& origins) {
  for (const auto& o : overrides)
    if (auto r = apply_one(doc, o, origins); !r) return r;
  return {};
}

}  // namespace tandem::host::model
