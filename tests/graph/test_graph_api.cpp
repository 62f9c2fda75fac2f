// The tdm_graph_api adapter, called the way a feature plugin calls it.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "graph/graph_api.hpp"
#include "plugin/call_window.hpp"
#include "util/last_error.hpp"

namespace tandem::host {
namespace {

struct Fixture {
  Graph g;
  const tdm_graph_api* api = graph_api_table();
  tdm_graph* cg = to_c(g);
  CallWindow pass{CallWindow::kGraphPass, cg};  // as the host opens it around graph_pass
  ValueId x;
  NodeId fc1, relu;
  Fixture() {
    x = *g.add_value("x", TDM_VALUE_INPUT, {TDM_F32, {2, 3}});
    fc1 = *g.insert_node({"linear",
                          "fc1",
                          "fc1",
                          TDM_PHASE_FORWARD,
                          {{"bias", int64_t{1}}, {"axes", std::vector<int64_t>{0, 1}}},
                          {x},
                          {{TDM_F32, {2, 3}}},
                          {}});
    relu = *g.insert_node({"relu",
                           "relu1",
                           "relu1",
                           TDM_PHASE_FORWARD,
                           {},
                           {g.node(fc1)->outputs[0]},
                           {{TDM_F32, {2, 3}}},
                           {}});
  }
};

TEST(GraphApi, ReadNodesValuesAttrs) {
  Fixture f;
  EXPECT_EQ(f.api->node_count(f.cg), 2u);
  tdm_node_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(f.api->node_at(f.cg, 0, &info), TDM_OK);
  EXPECT_EQ(info.id, f.fc1);
  EXPECT_STREQ(info.op, "linear");
  EXPECT_STREQ(info.name, "fc1");
  EXPECT_EQ(info.device, nullptr);
  EXPECT_EQ(info.n_attrs, 2u);
  EXPECT_EQ(f.api->node_at(f.cg, 2, &info), TDM_NOT_FOUND);

  tdm_attr a{};
  a.struct_size = sizeof a;
  ASSERT_EQ(f.api->node_attr_at(f.cg, f.fc1, 1, &a), TDM_OK);
  EXPECT_STREQ(a.name, "axes");
  EXPECT_EQ(a.type, TDM_ATTR_INTS);
  ASSERT_EQ(a.count, 2u);
  EXPECT_EQ(a.ints[1], 1);
  EXPECT_EQ(f.api->node_attr_at(f.cg, f.fc1, 2, &a), TDM_NOT_FOUND);

  tdm_value_id v = -7;
  ASSERT_EQ(f.api->node_output(f.cg, f.fc1, 0, &v), TDM_OK);
  tdm_value_info vi{};
  vi.struct_size = sizeof vi;
  ASSERT_EQ(f.api->value_get(f.cg, v, &vi), TDM_OK);
  EXPECT_STREQ(vi.name, "fc1:0");
  EXPECT_EQ(vi.producer, f.fc1);
  EXPECT_EQ(vi.desc.rank, 2u);
  EXPECT_EQ(vi.desc.dims[1], 3);
  EXPECT_EQ(f.api->value_count(f.cg), 3u);
  EXPECT_EQ(f.api->node_input(f.cg, f.fc1, 5, &v), TDM_NOT_FOUND);
}

TEST(GraphApi, SmallerReceiverStructGetsOnlyWhatFits) {
  Fixture f;
  tdm_node_info info;
  std::memset(&info, 0xab, sizeof info);
  info.struct_size = static_cast<uint32_t>(TDM_STRUCT_SIZE(tdm_node_info, op));
  ASSERT_EQ(f.api->node_get(f.cg, f.fc1, &info), TDM_OK);
  EXPECT_STREQ(info.op, "linear");
  const unsigned char* name_bytes = reinterpret_cast<const unsigned char*>(&info.name);
  EXPECT_EQ(name_bytes[0], 0xab);  // past the receiver's size: untouched
}

TEST(GraphApi, InsertCastAndReplaceUses) {
  Fixture f;
  tdm_value_id h = f.g.node(f.fc1)->outputs[0];
  int64_t dims[2] = {2, 3};
  tdm_tensor_desc out{};
  out.struct_size = sizeof out;
  out.dtype = TDM_BF16;
  out.rank = 2;
  out.dims = dims;
  tdm_attr to{};
  to.struct_size = sizeof to;
  to.name = "to";
  to.type = TDM_ATTR_INT;
  to.i = TDM_BF16;
  tdm_node_spec spec{};
  spec.struct_size = sizeof spec;
  spec.op = "cast";
  spec.name = "fc1.cast";
  spec.phase = TDM_PHASE_FORWARD;
  spec.attrs = &to;
  spec.n_attrs = 1;
  spec.inputs = &h;
  spec.n_inputs = 1;
  spec.outputs = &out;
  spec.n_outputs = 1;
  spec.anchor = f.relu;
  tdm_node_id cast = -1;
  ASSERT_EQ(f.api->node_insert(f.cg, &spec, &cast), TDM_OK);
  tdm_value_id c;
  ASSERT_EQ(f.api->node_output(f.cg, cast, 0, &c), TDM_OK);
  ASSERT_EQ(f.api->value_replace_uses(f.cg, h, c, cast), TDM_OK);
  EXPECT_EQ(f.g.node(f.relu)->inputs[0], c);
  EXPECT_EQ(f.g.node_at(1)->name, "fc1.cast");

  // Duplicate name: refused with a message in the error slot.
  clear_last_error();
  EXPECT_EQ(f.api->node_insert(f.cg, &spec, &cast), TDM_INVALID_ARGUMENT);
  std::optional<LastError> e = take_last_error();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "graph");
  EXPECT_NE(e->message.find("'fc1.cast' already exists"), std::string::npos);
}

TEST(GraphApi, RewritesAndRefusals) {
  Fixture f;
  tdm_value_id r = f.g.node(f.relu)->outputs[0];
  EXPECT_EQ(f.api->node_set_input(f.cg, f.fc1, 0, r), TDM_INVALID_ARGUMENT);  // cycle
  EXPECT_NE(last_error_text("").find("cyclic"), std::string::npos);
  EXPECT_EQ(f.api->node_set_input(f.cg, 999, 0, f.x), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(f.api->node_remove(f.cg, f.relu), TDM_OK);
  EXPECT_EQ(f.api->node_remove(f.cg, f.relu), TDM_INVALID_ARGUMENT);  // ids are never reused

  tdm_attr eps{};
  eps.struct_size = sizeof eps;
  eps.name = "epsilon";
  eps.type = TDM_ATTR_FLOAT;
  eps.f = 1e-5;
  EXPECT_EQ(f.api->node_set_attr(f.cg, f.fc1, &eps), TDM_OK);
  eps.type = 99;
  EXPECT_EQ(f.api->node_set_attr(f.cg, f.fc1, &eps), TDM_INVALID_ARGUMENT);

  EXPECT_EQ(f.api->node_annotate(f.cg, f.fc1, "checkpointing.segment", "2"), TDM_OK);
  EXPECT_STREQ(f.api->node_annotation(f.cg, f.fc1, "checkpointing.segment"), "2");
  EXPECT_EQ(f.api->node_annotate(f.cg, f.fc1, "checkpointing.segment", nullptr), TDM_OK);
  EXPECT_EQ(f.api->node_annotation(f.cg, f.fc1, "checkpointing.segment"), nullptr);

  tdm_tensor_desc scalar{};
  scalar.struct_size = sizeof scalar;
  scalar.dtype = TDM_F32;
  tdm_value_id s = -1;
  ASSERT_EQ(f.api->state_add(f.cg, "amp.loss_scale", &scalar, 65536.0, &s), TDM_OK);
  tdm_value_info vi{};
  vi.struct_size = sizeof vi;
  ASSERT_EQ(f.api->value_get(f.cg, s, &vi), TDM_OK);
  EXPECT_EQ(vi.kind, TDM_VALUE_STATE);
  EXPECT_EQ(vi.desc.rank, 0u);
  EXPECT_EQ(vi.desc.dims, nullptr);
  EXPECT_EQ(f.api->state_add(f.cg, "amp.loss_scale", &scalar, 1.0, &s), TDM_INVALID_ARGUMENT);
}

// A binding the catalog does not allow is refused when the pass asks for it
// (sdk/ABI.md rule 31), not dropped later with the state never updated.
TEST(GraphApi, InPlaceRequestsAreCheckedAgainstTheCatalog) {
  Fixture f;
  const auto refused = [&](const char* request, const std::string& reason) {
    clear_last_error();
    EXPECT_EQ(f.api->node_annotate(f.cg, f.fc1, "tandem.inplace", request), TDM_INVALID_ARGUMENT) << request;
    const std::string why = last_error_text("");
    EXPECT_NE(why.find(reason), std::string::npos) << why;
  };
  refused("0:0", "sdk/ops.md allows no in-place pair for linear, not 0:0");
  refused("0:7", "no input 7");
  refused("zero:0", "is not out:in");
  EXPECT_EQ(f.api->node_annotation(f.cg, f.fc1, "tandem.inplace"), nullptr) << "nothing recorded";
}

// A graph kept after its pass, or used from another thread than the pass's,
// is refused with the rule (sdk/ABI.md rule 43), not edited behind the
// host's back.
TEST(GraphApi, CallsOutsideThePassAreRefused) {
  Graph g;
  (void)*g.add_value("x", TDM_VALUE_INPUT, {TDM_F32, {2}});
  const tdm_graph_api* api = graph_api_table();
  clear_last_error();
  EXPECT_EQ(api->value_count(to_c(g)), 0u);
  const std::string why = last_error_text("");
  EXPECT_NE(why.find("value_count outside a graph pass"), std::string::npos) << why;
  EXPECT_NE(why.find("rule 43"), std::string::npos) << why;
  tdm_value_id id = TDM_NO_VALUE;
  tdm_tensor_desc desc{sizeof(tdm_tensor_desc), TDM_F32, 0, nullptr, nullptr};
  EXPECT_EQ(api->state_add(to_c(g), "late", &desc, 0.0, &id), TDM_INVALID_ARGUMENT);
  EXPECT_EQ(g.value_by_name("late"), nullptr);
  {
    CallWindow pass(CallWindow::kGraphPass, to_c(g));
    EXPECT_EQ(api->value_count(to_c(g)), 1u);
    Graph other;
    EXPECT_EQ(api->value_count(to_c(other)), 0u) << "only the pass's graph";
    size_t from_helper = 99;
    std::thread([&] { from_helper = api->value_count(to_c(g)); }).join();
    EXPECT_EQ(from_helper, 0u) << "only on the pass's thread";
  }
  EXPECT_EQ(api->value_count(to_c(g)), 0u) << "closed again after the pass";
}

}  // namespace
}  // namespace tandem::host
