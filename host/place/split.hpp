// One graph per device: the nodes a placement put on that device, in
// schedule order, each device's graph runnable by its own executor.
//
// A tensor that crosses devices appears in the consumer device's graph as an
// input (the "tandem.copy" node that brought it is left out: whoever runs
// the graphs copies the bytes), and in the producer device's graph among
// `exported` (it must stay readable until copied).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "place/placement.hpp"

namespace tandem::host::place {

struct DeviceGraph {
  std::string device;
  Graph graph;
  std::vector<size_t> positions;        // the global schedule position of each node
  std::map<ValueId, ValueId> local_of;  // global value -> this graph's value
  std::set<std::string> exported;       // names of values another device reads
};

struct Transfer {  // a copy node of the global schedule
  size_t position = 0;
  std::string value;  // global name of the source; the destination is named value@device
  std::string from, to;
};

struct SplitGraph {
  std::vector<DeviceGraph> devices;  // in Placement::devices order
  std::vector<Transfer> transfers;   // in schedule order
};

Result<SplitGraph> split_by_device(const Graph& placed, const Placement& placement);

}  // namespace tandem::host::place
