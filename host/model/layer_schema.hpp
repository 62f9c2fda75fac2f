// The layer kinds a model file may use, and the attributes each accepts.
//
// The parser checks every key of a [[layers]] entry against this table, so a
// misspelt attribute is an error naming the layer, the file position and the
// keys that are accepted, never silently ignored.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::host::model {

enum class AttrKind { Int, Float, Bool, String, Ints, Floats, IntOrInts };

// The values a number may take (every entry of a list): [low, high], an
// end excluded when `open_low` / `open_high`; `text` says it in words for
// messages.
struct AttrRange {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool open_low = false;
  std::string text;
  bool open_high = false;
  bool contains(double v) const {
    return (open_low ? v > low : v >= low) && (open_high ? v < high : v <= high);
  }
};

struct AttrSchema {
  std::string key;
  AttrKind kind;
  std::vector<std::string> choices;  // for String: the accepted values (empty = any)
  bool required = false;
  AttrRange range;  // for numbers
};

struct LayerSchema {
  std::string op;
  std::string summary;  // one line: what the layer computes
  std::vector<AttrSchema> attrs;
  int min_inputs = 1;
  int max_inputs = 1;
};

// The catalog ops that are no model-file layer of their own name, each
// with how it enters a graph instead or why it does not (gradient, optimizer
// and host-run ops aside: autodiff, the optimizer and the host emit those).
// tests/ops/catalog_coverage_test.cpp fails on a catalog op that is neither
// a layer kind nor here.
const std::map<std::string_view, std::string_view>& ops_without_a_layer();

// nullptr when `op` is not a layer kind.
const LayerSchema* find_layer_schema(const std::string& op);
const std::vector<LayerSchema>& layer_schemas();
const char* attr_kind_name(AttrKind kind);

}  // namespace tandem::host::model
