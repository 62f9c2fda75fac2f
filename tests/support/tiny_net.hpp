// A graph small enough to check by hand, for executor tests:
// input [4,3] -> linear (w [2,3], b [2]) -> relu -> softmax_cross_entropy
// with labels [4].
#pragma once

#include "graph/graph.hpp"

namespace tandem::test {

struct Net {
  host::Graph graph;
  host::ValueId x, w, b, labels, logits, loss;
};

inline Net make_net() {
  Net n;
  n.x = *n.graph.add_value("input", TDM_VALUE_INPUT, {TDM_F32, {4, 3}});
  n.labels = *n.graph.add_value("labels", TDM_VALUE_INPUT, {TDM_S32, {4}});
  n.w = *n.graph.add_value("fc.weight", TDM_VALUE_PARAMETER, {TDM_F32, {2, 3}});
  n.b = *n.graph.add_value("fc.bias", TDM_VALUE_PARAMETER, {TDM_F32, {2}});
  host::NodeSpec fc{"linear",
                    "fc",
                    "fc",
                    TDM_PHASE_FORWARD,
                    {{"activation", std::string("none")}},
                    {n.x, n.w, n.b},
                    {{TDM_F32, {4, 2}}},
                    {"fc"}};
  host::ValueId y = n.graph.node(*n.graph.insert_node(fc))->outputs[0];
  host::NodeSpec act{"relu", "act", "act", TDM_PHASE_FORWARD, {}, {y}, {{TDM_F32, {4, 2}}}, {"act"}};
  n.logits = n.graph.node(*n.graph.insert_node(act))->outputs[0];
  host::NodeSpec ce{"softmax_cross_entropy", "loss",          "loss",  TDM_PHASE_FORWARD, {},
                    {n.logits, n.labels},    {{TDM_F32, {}}}, {"loss"}};
  n.loss = n.graph.node(*n.graph.insert_node(ce))->outputs[0];
  return n;
}

}  // namespace tandem::test
