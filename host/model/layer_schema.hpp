// The layer kinds a model file may use, and the attributes each accepts.
//
// The parser checks every key of a [[layers]] entry against this table, so a
// misspelt attribute is an error naming the layer, the file position and the
// keys that are accepted, never silently ignored.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace tandem::host::model {

enum class AttrKind { Int, Float, Bool, String, Ints, Floats, IntOrInts };

// The values a number may take (every entry of a list): [low, high], or
// (low, high] when `open_low`; `text` says it in words for messages.
struct AttrRange {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool open_low = false;
  const char* text = nullptr;
  bool contains(double v) const { return (open_low ? v > low : v >= low) && v <= high; }
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
  std::string summary;  // one line, for `tandem train --help-layers` and messages
  std::vector<AttrSchema> attrs;
  int min_inputs = 1;
  int max_inputs = 1;
};

// nullptr when `op` is not a layer kind.
const LayerSchema* find_layer_schema(const std::string& op);
const std::vector<LayerSchema>& layer_schemas();
const char* attr_kind_name(AttrKind kind);

}  // namespace tandem::host::model
