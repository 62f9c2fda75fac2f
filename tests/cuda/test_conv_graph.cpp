// The cuda plugin's convolutions on cuDNN's graph API
// (plugins/cuda/ops/conv_graph.cpp), run against a stand-in for cuDNN
// (fake_cudnn_graph.cpp) on any machine: which engine the rule takes and how
// many plans it finalizes for that, the numerics it refuses, declines and
// errors, the handle or device properties each cuDNN version needs, and the
// tensors each direction binds. The convolution's values are the GPU
// tests' part (test_plugin.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/conv_graph.hpp"
#include "vendor/vendor_libraries.hpp"

namespace tandem::cuda {
// The plugin's cuDNN, here the stand-in.
VendorLibrary& cudnn_library() {
  static VendorLibrary library("the test's cuDNN", {TANDEM_FAKE_CUDNN_PATH});
  return library;
}
}  // namespace tandem::cuda

namespace {

using namespace tandem::cuda;

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kModeA = 0, kFallback = 1;

int64_t notes(std::initializer_list<cudnnBackendNumericalNote_t> list) {
  int64_t bits = 0;
  for (auto n : list) bits |= int64_t(1) << int(n);
  return bits;
}
const int64_t kNondeterministic = notes({CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC});

// One engine the heuristic answers: index, workspace (-1: its plan does not
// finalize), numerical notes, which list.
struct FakeEngine {
  int64_t index, workspace, notes, list;
};

template <class Fn>
Fn fake(const char* name) {
  return cudnn_library().symbol<Fn>(name);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

class ConvGraph : public ::testing::Test {
 protected:
  void describe(const std::vector<FakeEngine>& engines, size_t version = 91900,
                cudnnBackendDescriptorType_t refuse = CUDNN_BACKEND_POINTWISE_DESCRIPTOR) {  // none refused
    std::vector<int64_t> flat;
    for (const FakeEngine& e : engines) flat.insert(flat.end(), {e.index, e.workspace, e.notes, e.list});
    fake<void (*)(size_t, const int64_t*, int, int)>("fake_cudnn_reset")(version, flat.data(),
                                                                         int(engines.size()), int(refuse));
  }
  static std::string log() { return fake<const char* (*)()>("fake_cudnn_log")(); }
  static size_t live() { return fake<size_t (*)()>("fake_cudnn_live_descriptors")(); }

  // x [2, 3, 6, 5], w [4, 3, 3, 3], y [2, 4, 3, 3]: stride 2, padding 1.
  static ConvGraphShape shape(cudnnDataType_t dtype = CUDNN_DATA_FLOAT) {
    ConvGraphShape s;
    s.dtype = dtype;
    const int64_t x[4] = {2, 3, 6, 5}, w[4] = {4, 3, 3, 3}, y[4] = {2, 4, 3, 3};
    for (int i = 0; i < 4; ++i) s.x[i] = x[i], s.w[i] = w[i], s.y[i] = y[i];
    s.stride[0] = s.stride[1] = 2, s.padding[0] = s.padding[1] = 1;
    return s;
  }

  std::unique_ptr<ConvGraphPlan> build(math::Determinism determinism = math::Determinism::prefer,
                                       size_t limit = size_t(256) << 20, bool tf32 = false,
                                       ConvDirection direction = ConvDirection::Forward,
                                       cudnnDataType_t dtype = CUDNN_DATA_FLOAT) {
    math::ConvAlgorithmOptions o;
    o.determinism = determinism, o.workspace_limit = limit;
    why_none.clear();
    error = {};
    return ConvGraphPlan::build({handle, {}}, direction, shape(dtype), tf32, o, why_none, error);
  }

  cudnnHandle_t handle = reinterpret_cast<cudnnHandle_t>(uintptr_t(0x1000));
  std::string why_none;
  ConvGraphError error;
};

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing '" << (part) << "' in:\n" << (text)
#define EXPECT_LACKS(text, part) \
  EXPECT_EQ((text).find(part), std::string::npos) << "unexpected '" << (part) << "' in:\n" << (text)

TEST_F(ConvGraph, TakesTheFirstDeterministicEngineThatFitsAndFinalizesNoMorePlans) {
  describe({{11, 0, kNondeterministic, kModeA},
            {12, 600 * kMiB, 0, kModeA},
            {13, 10 * kMiB, 0, kModeA},
            {14, 0, 0, kFallback}});
  auto plan = build();
  ASSERT_TRUE(plan) << why_none << error.what;
  EXPECT_EQ(plan->engine(), 13);
  EXPECT_EQ(plan->workspace(), size_t(10 * kMiB));
  EXPECT_TRUE(plan->deterministic());
  const std::string l = log();
  EXPECT_HAS(l, "plan engine 12\nplan engine 13\n");
  EXPECT_LACKS(l, "plan engine 11");
  EXPECT_LACKS(l, "plan engine 14");
  plan.reset();
  EXPECT_EQ(live(), 0u);
}

TEST_F(ConvGraph, AnyTakesTheHeuristicsFirstAndTheFallbackListComesLast) {
  describe({{14, 0, 0, kFallback}, {11, 0, kNondeterministic, kModeA}, {12, 0, 0, kModeA}});
  auto plan = build(math::Determinism::any);
  ASSERT_TRUE(plan) << why_none << error.what;
  EXPECT_EQ(plan->engine(), 11);
  EXPECT_FALSE(plan->deterministic());
  // Only the fallback list has one that fits.
  describe({{21, 900 * kMiB, 0, kModeA}, {22, kMiB, 0, kFallback}});
  plan = build();
  ASSERT_TRUE(plan) << why_none << error.what;
  EXPECT_EQ(plan->engine(), 22);
}

TEST_F(ConvGraph, AnEngineWhosePlanDoesNotFinalizeIsPassedOver) {
  describe({{31, -1, 0, kModeA}, {32, 0, 0, kModeA}});
  auto plan = build();
  ASSERT_TRUE(plan) << why_none << error.what;
  EXPECT_EQ(plan->engine(), 32);
  EXPECT_HAS(log(), "plan engine 31\nplan engine 32\n");
}

TEST_F(ConvGraph, F32StaysF32UnlessTf32AndEverySumIsF32) {
  const int64_t tensor_core = notes({CUDNN_NUMERICAL_NOTE_TENSOR_CORE});
  const int64_t reduced =
      notes({CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION, CUDNN_NUMERICAL_NOTE_TENSOR_CORE});
  const std::vector<FakeEngine> engines = {
      {41, 0, reduced, kModeA}, {42, 0, tensor_core, kModeA}, {43, 0, 0, kModeA}};
  describe(engines);
  auto plan = build();
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->engine(), 43);
  EXPECT_LACKS(log(), "plan engine 41");  // refused by its notes, never finalized
  describe(engines);
  plan = build(math::Determinism::prefer, size_t(256) << 20, /*tf32=*/true);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->engine(), 42);
  describe(engines);
  plan =
      build(math::Determinism::prefer, size_t(256) << 20, false, ConvDirection::Forward, CUDNN_DATA_BFLOAT16);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->engine(), 42);
}

TEST_F(ConvGraph, NothingFittingIsADeclineWithTheRulesReason) {
  describe({{51, 900 * kMiB, 0, kModeA}, {52, 8 * kMiB, kNondeterministic, kModeA}});
  EXPECT_FALSE(build(math::Determinism::require));
  EXPECT_EQ(error.status, CUDNN_STATUS_SUCCESS);
  EXPECT_HAS(why_none, "every deterministic algorithm");
  EXPECT_HAS(why_none, "the smallest needs 900.0 MiB");
  EXPECT_EQ(live(), 0u);

  describe({});
  EXPECT_FALSE(build());
  EXPECT_EQ(why_none, "cuDNN has no algorithm for this convolution and dtype");
  describe({{53, -1, 0, kModeA}});
  EXPECT_FALSE(build());
  EXPECT_EQ(why_none, "cuDNN has no algorithm for this convolution and dtype");
}

TEST_F(ConvGraph, AGraphCudnnRefusesIsAnErrorNotADecline) {
  describe({{61, 0, 0, kModeA}}, 91900, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  EXPECT_FALSE(build());
  EXPECT_TRUE(why_none.empty()) << why_none;
  EXPECT_EQ(error.what, "the operation graph");
  EXPECT_EQ(error.status, CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(live(), 0u);
}

TEST_F(ConvGraph, FromCudnn98PlansAreForTheDeviceBeforeForTheHandle) {
  describe({{71, 0, 0, kModeA}}, 91900);
  ASSERT_TRUE(build()) << error.what;
  EXPECT_LACKS(log(), "handle on");
  describe({{71, 0, 0, kModeA}}, 90700);  // the stand-in refuses device properties there
  ASSERT_TRUE(build()) << error.what;
  EXPECT_HAS(log(), "handle on graph");
  EXPECT_HAS(log(), "handle on plan");
}

TEST_F(ConvGraph, EachDirectionBindsItsTensorsByRole) {
  const std::string x = "x[2,3,6,5/90,30,5,1] type " + str(CUDNN_DATA_FLOAT) + " align 16";
  const std::string w = "w[4,3,3,3/27,9,3,1] type " + str(CUDNN_DATA_FLOAT) + " align 16";
  const std::string y = "y[2,4,3,3/36,9,3,1] type " + str(CUDNN_DATA_FLOAT) + " align 16";
  const struct {
    ConvDirection direction;
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, alpha, beta;
  } cases[] = {
      {ConvDirection::Forward, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {ConvDirection::GradInput, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {ConvDirection::GradWeight, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  for (const auto& c : cases) {
    describe({{81, 4096, 0, kModeA}});
    auto plan = build(math::Determinism::prefer, size_t(256) << 20, false, c.direction);
    ASSERT_TRUE(plan) << error.what;
    const std::string l = log();
    EXPECT_HAS(l, " " + str(c.x) + "=" + x);
    EXPECT_HAS(l, " " + str(c.w) + "=" + w);
    EXPECT_HAS(l, " " + str(c.y) + "=" + y);
    EXPECT_HAS(l, " " + str(c.alpha) + "=1 " + str(c.beta) + "=0");  // overwrite, not accumulate
    EXPECT_HAS(l, "graph of operation type " + str(c.type));
    // f32 sums, cross-correlation, the strides, paddings on both sides, dilations.
    EXPECT_HAS(l, "convolution " + str(CUDNN_ATTR_CONVOLUTION_COMP_TYPE) + "=" + str(CUDNN_DATA_FLOAT) + " " +
                      str(CUDNN_ATTR_CONVOLUTION_CONV_MODE) + "=" + str(CUDNN_CROSS_CORRELATION) + " " +
                      str(CUDNN_ATTR_CONVOLUTION_DILATIONS) + "=1,1 " +
                      str(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES) + "=2,2 " +
                      str(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS) + "=1,1 " +
                      str(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS) + "=1,1 " +
                      str(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS) + "=2\n");
    // A launch binds the three tensors by role and the workspace, on the stream's handle.
    auto* stream_handle = reinterpret_cast<cudnnHandle_t>(uintptr_t(0x2000));
    EXPECT_EQ(plan->run(stream_handle, reinterpret_cast<void*>(0x100), reinterpret_cast<void*>(0x200),
                        reinterpret_cast<void*>(0x300), reinterpret_cast<void*>(0x400)),
              CUDNN_STATUS_SUCCESS);
    EXPECT_HAS(log(), "execute engine 81 handle 8192 x=256 w=512 y=768 ws=1024\n");
    plan.reset();
    EXPECT_EQ(live(), 0u);  // the launch's variant pack included
  }
}

TEST_F(ConvGraph, ALaunchBindsItsAddressesOnceAndAgainOnlyWhenTheyChange) {
  describe({{91, 4096, 0, kModeA}});
  auto plan = build();
  ASSERT_TRUE(plan) << error.what;
  const auto at = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  const auto packs = [] {
    const std::string l = log();
    size_t n = 0;
    for (size_t i = l.find("variant pack\n"); i != std::string::npos; i = l.find("variant pack\n", i + 1))
      ++n;
    return n;
  };
  for (int step = 0; step < 3; ++step)
    ASSERT_EQ(plan->run(handle, at(0x100), at(0x200), at(0x300), at(0x400)), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(packs(), 1u);
  ASSERT_EQ(plan->run(handle, at(0x100), at(0x200), at(0x300), at(0x800)), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(packs(), 2u);
  EXPECT_HAS(log(), "execute engine 91 handle 4096 x=256 w=512 y=768 ws=2048\n");
  plan.reset();
  EXPECT_EQ(live(), 0u);
}

}  // namespace
