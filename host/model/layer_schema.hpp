// The layer kinds a model file may use, and the attributes each accepts.
//
// The parser checks every key of a [[layers]] entry against this table, so a
// misspelt attribute is an error naming the layer, the file position and the
// keys that are accepted, never silently ignored.
#pragma once

#include <string>
#include <vector>

namespace tandem::host::model {

enum class AttrKind { Int, Float, Bool, String, Ints, Floats, IntOrInts };

struct AttrSchema {
  std::string key;
  AttrKind kind;
  std::vector<std::string> choices;  // for String: the accepted values (empty = any)
  bool required = false;
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
