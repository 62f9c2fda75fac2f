#include "model/section_reader.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace tandem::host::model {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Names other frameworks give to a key or op of ours; suggested only where
// ours is one of the candidates.
const std::map<std::string, std::string>& other_names() {
  static const std::map<std::string, std::string> names = {
      {"learning_rate", "lr"},     {"num_heads", "heads"},        {"n_heads", "heads"},
      {"eps", "epsilon"},          {"units", "out_features"},     {"hidden_size", "out_features"},
      {"dense", "linear"},         {"fully_connected", "linear"}, {"conv", "conv2d"},
      {"layernorm", "layer_norm"}, {"rmsnorm", "rms_norm"},       {"maxpool", "max_pool2d"},
      {"avgpool", "avg_pool2d"}};
  return names;
}

}  // namespace

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const auto is_candidate = [&](const std::string& c) {
    return std::find(candidates.begin(), candidates.end(), c) != candidates.end();
  };
  if (auto it = other_names().find(word); it != other_names().end() && is_candidate(it->second))
    return " (did you mean '" + it->second + "'?)";
  const std::string* best = nullptr;
  size_t best_distance = 3;  // two edits at most
  for (const auto& c : candidates)
    if (const size_t d = edit_distance(word, c); d < best_distance) best = &c, best_distance = d;
  return best ? " (did you mean '" + *best + "'?)" : "";
}

std::string SourceLocation::str() const {
  if (line == 0) return file;  // a --set override, or a value with no place in the file
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

SourceLocation Reader::location(const toml::node& node) const {
  if (overrides_ != nullptr)
    if (auto it = overrides_->find(&node); it != overrides_->end()) return {"--set " + it->second, 0, 0};
  const auto& b = node.source().begin;
  return {file_, static_cast<uint32_t>(b.line), static_cast<uint32_t>(b.column)};
}

void Reader::check(const toml::table& t, const std::string& key, bool ok, const std::string& message) {
  if (ok) return;
  const toml::node* n = t.get(key);
  fail(n != nullptr ? *n : static_cast<const toml::node&>(t), message);
}

void Reader::fail(const toml::node& node, const std::string& message) {
  if (!error_) error_ = location(node).str() + ": " + message;
}

void Reader::type_error(const toml::node& node, const std::string& key, const char* expected) {
  fail(node, "'" + key + "' must be " + expected);
}

void Reader::check_keys(const toml::table& t, const std::string& who,
                        const std::vector<std::string>& allowed) {
  for (const auto& [k, node] : t) {
    const std::string key(k.str());
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    fail(node, who + ": unknown key '" + key + "'" + did_you_mean(key, allowed) +
                   "; expected one of: " + join(allowed));
  }
}

const toml::table* Reader::table(const toml::table& parent, const std::string& key, bool required) {
  const toml::node* node = parent.get(key);
  if (node == nullptr) {
    if (required) fail(parent, "missing section [" + key + "]");
    return nullptr;
  }
  if (!node->is_table()) {
    fail(*node, "'" + key + "' must be a section ([" + key + "])");
    return nullptr;
  }
  return node->as_table();
}

bool Reader::get(const toml::table& t, const std::string& key, std::string& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  if (auto v = n->value<std::string>(); v && n->is_string())
    out = *v;
  else
    type_error(*n, key, "a string in quotes");
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, int64_t& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  if (n->is_integer())
    out = n->as_integer()->get();
  else
    type_error(*n, key, "an integer");
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, double& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  if (n->is_floating_point())
    out = n->as_floating_point()->get();
  else if (n->is_integer())
    out = static_cast<double>(n->as_integer()->get());
  else
    type_error(*n, key, "a number");
  if (!std::isfinite(out)) fail(*n, "'" + key + "' must be a finite number, not " + scalar_text(*n));
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, bool& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  if (n->is_boolean())
    out = n->as_boolean()->get();
  else
    type_error(*n, key, "true or false");
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, std::vector<int64_t>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  const toml::array* a = n->as_array();
  if (a == nullptr ||
      !std::all_of(a->begin(), a->end(), [](const toml::node& e) { return e.is_integer(); })) {
    type_error(*n, key, "a list of integers, e.g. [1, 28, 28]");
    return true;
  }
  out.clear();
  for (const auto& e : *a) out.push_back(e.as_integer()->get());
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, std::vector<double>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  const toml::array* a = n->as_array();
  if (a == nullptr || !std::all_of(a->begin(), a->end(), [](const toml::node& e) { return e.is_number(); })) {
    type_error(*n, key, "a list of numbers, e.g. [0.5, 0.25]");
    return true;
  }
  out.clear();
  for (const auto& e : *a) {
    out.push_back(e.is_integer() ? static_cast<double>(e.as_integer()->get()) : e.as_floating_point()->get());
    if (!std::isfinite(out.back())) fail(e, "'" + key + "' must hold finite numbers, not " + scalar_text(e));
  }
  return true;
}

bool Reader::get(const toml::table& t, const std::string& key, std::vector<std::string>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return false;
  const toml::array* a = n->as_array();
  if (a == nullptr || !std::all_of(a->begin(), a->end(), [](const toml::node& e) { return e.is_string(); })) {
    type_error(*n, key, "a list of strings, e.g. [\"conv1\", \"skip\"]");
    return true;
  }
  out.clear();
  for (const auto& e : *a) out.push_back(e.as_string()->get());
  return true;
}

bool Reader::get_choice(const toml::table& t, const std::string& key, std::string& out,
                        const std::vector<std::string>& choices) {
  if (!get(t, key, out)) return false;
  if (std::find(choices.begin(), choices.end(), out) == choices.end())
    fail(*t.get(key),
         "'" + key + "' = \"" + out + "\" is not one of: " + join(choices) + did_you_mean(out, choices));
  return true;
}

bool Reader::require(const toml::table& t, const std::string& key, std::string& out, const std::string& who) {
  if (get(t, key, out)) return true;
  fail(t, who + ": missing '" + key + "'");
  return false;
}

void Reader::get_attr(const toml::table& t, const std::string& who, const AttrSchema& schema,
                      std::map<std::string, AttrValue>& attrs) {
  const toml::node* n = t.get(schema.key);
  if (n == nullptr) {
    if (schema.required)
      fail(t, who + ": missing '" + schema.key + "' (" + attr_kind_name(schema.kind) + ")");
    return;
  }
  const std::string where = who + ": '" + schema.key + "' must be " + attr_kind_name(schema.kind);
  const auto out_of_range = [&](double v) {
    if (schema.range.contains(v)) return false;
    std::ostringstream text;
    text << who << ": '" << schema.key << "' = " << v << " must be "
         << (schema.range.text.empty() ? "in range" : schema.range.text);
    fail(*n, text.str());
    return true;
  };
  switch (schema.kind) {
    case AttrKind::Int:
      if (!n->is_integer()) return fail(*n, where);
      if (out_of_range(double(n->as_integer()->get()))) return;
      attrs[schema.key] = n->as_integer()->get();
      return;
    case AttrKind::Float: {
      if (!n->is_number()) return fail(*n, where);
      const double v =
          n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
      if (!std::isfinite(v)) return fail(*n, who + ": '" + schema.key + "' must be a finite number");
      if (out_of_range(v)) return;
      attrs[schema.key] = v;
      return;
    }
    case AttrKind::Bool:
      if (!n->is_boolean()) return fail(*n, where);
      attrs[schema.key] = n->as_boolean()->get();
      return;
    case AttrKind::String: {
      if (!n->is_string()) return fail(*n, where);
      std::string v = n->as_string()->get();
      if (!schema.choices.empty() &&
          std::find(schema.choices.begin(), schema.choices.end(), v) == schema.choices.end())
        return fail(*n, who + ": '" + schema.key + "' = \"" + v +
                            "\" is not one of: " + join(schema.choices) + did_you_mean(v, schema.choices));
      attrs[schema.key] = v;
      return;
    }
    case AttrKind::IntOrInts:
      if (n->is_integer()) {
        const int64_t v = n->as_integer()->get();
        if (out_of_range(double(v))) return;
        attrs[schema.key] = std::vector<int64_t>{v, v};
        return;
      }
      [[fallthrough]];
    case AttrKind::Ints: {
      std::vector<int64_t> v;
      Reader probe(file_);
      probe.get(t, schema.key, v);
      if (probe.error() || (schema.kind == AttrKind::IntOrInts && v.size() != 2)) return fail(*n, where);
      for (int64_t e : v)
        if (out_of_range(double(e))) return;
      attrs[schema.key] = v;
      return;
    }
    case AttrKind::Floats: {
      std::vector<double> v;
      Reader probe(file_);
      probe.get(t, schema.key, v);
      if (probe.error()) return fail(*n, where);
      attrs[schema.key] = v;
      return;
    }
  }
}

std::string Reader::scalar_text(const toml::node& node) const {
  if (const auto* s = node.as_string()) return s->get();
  std::ostringstream out;
  node.visit([&](const auto& v) { out << v; });
  return out.str();
}

}  // namespace tandem::host::model
