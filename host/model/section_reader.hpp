// Typed, located reads from a TOML document for the model parser.
//
// The Reader keeps the first error it meets ("file:line:col: message") and
// turns later reads into no-ops that leave defaults in place, so the parser
// reads straight through and reports one precise error at the end.
#pragma once

#include <toml++/toml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/layer_schema.hpp"
#include "model/model_spec.hpp"

namespace tandem::host::model {

// Nodes a --set override put into the document, and the override's text:
// an error about such a value names the override, not a line of the file.
using OverrideOrigins = std::map<const toml::node*, std::string>;

// A number as a user wrote it: 0.001, -5, 1e-08.
std::string number_text(double v);

// "a, b, c": the names an error lists as the ones expected.
std::string join(const std::vector<std::string>& items);

// " (did you mean 'x'?)" for the candidate closest to `word` within two
// edits, or for a name other frameworks use for a candidate (learning_rate
// for lr, num_heads for heads, ...); "" when nothing is that close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

class Reader {
 public:
  explicit Reader(std::string file, const OverrideOrigins* overrides = nullptr)
      : file_(std::move(file)), overrides_(overrides) {}

  SourceLocation location(const toml::node& node) const;
  void fail(const toml::node& node, const std::string& message);
  const std::optional<std::string>& error() const { return error_; }

  // Every key of `t` must be in `allowed`; `who` names the section or layer.
  void check_keys(const toml::table& t, const std::string& who, const std::vector<std::string>& allowed);
  // The sub-table `key`, or nullptr (an error if `required`, or if not a table).
  const toml::table* table(const toml::table& parent, const std::string& key, bool required);

  // An error at `key`'s value (or at `t` when the key is absent) unless `ok`.
  void check(const toml::table& t, const std::string& key, bool ok, const std::string& message);

  // Each returns whether the key was present; a wrongly typed value is an
  // error, and so is a number that is not finite (nan, inf).
  bool get(const toml::table& t, const std::string& key, std::string& out);
  bool get(const toml::table& t, const std::string& key, int64_t& out);
  bool get(const toml::table& t, const std::string& key, double& out);
  bool get(const toml::table& t, const std::string& key, bool& out);
  bool get(const toml::table& t, const std::string& key, std::vector<int64_t>& out);
  bool get(const toml::table& t, const std::string& key, std::vector<double>& out);
  bool get(const toml::table& t, const std::string& key, std::vector<std::string>& out);
  bool get_choice(const toml::table& t, const std::string& key, std::string& out,
                  const std::vector<std::string>& choices);
  bool require(const toml::table& t, const std::string& key, std::string& out, const std::string& who);
  // A layer attribute, checked against its schema, into `attrs`.
  void get_attr(const toml::table& t, const std::string& who, const AttrSchema& schema,
                std::map<std::string, AttrValue>& attrs);
  // A value as text, for feature sections handed to plugins as strings.
  std::string scalar_text(const toml::node& node) const;

 private:
  void type_error(const toml::node& node, const std::string& key, const char* expected);

  std::string file_;
  const OverrideOrigins* overrides_ = nullptr;
  std::optional<std::string> error_;
};

}  // namespace tandem::host::model
