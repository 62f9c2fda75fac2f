// amp edits the graph with the SDK's C++ helper.
#pragma once

#include <tandem/graph_edit.hpp>

namespace amp {
using tandem::GraphEdit;
using tandem::NodeView;
using tandem::OwnedAttr;
using tandem::ValueView;
}  // namespace amp
