// Prepare-time and launch-time errors: status and message.
#include "expect.hpp"

using namespace ref_test;

TEST(Errors, UnsupportedDtypeIsUnsupported) {
  std::vector<Tensor> y = {out(TDM_S32, {2})};
  auto r = run("relu", {s32({2}, {1, 2})}, y);
  EXPECT_EQ(r.status, TDM_UNSUPPORTED);
  EXPECT_EQ(r.failed_at, Stage::Prepare);
  EXPECT_NE(r.message.find("s32"), std::string::npos) << r.message;
  // max_pool2d is listed for f32 and bf16 only
  std::vector<Tensor> p = {out(TDM_F16, {1, 1, 1, 1})};
  r = run("max_pool2d", {bits16(TDM_F16, {1, 1, 2, 2}, {0, 0, 0, 0})}, p,
          {attr("kernel", std::vector<int64_t>{2, 2})});
  EXPECT_EQ(r.status, TDM_UNSUPPORTED);
}

TEST(Errors, UnknownOpIsUnsupported) {
  std::vector<Tensor> y = {out(TDM_F32, {1})};
  auto r = run("frobnicate", {f32({1}, {1})}, y);
  EXPECT_EQ(r.status, TDM_UNSUPPORTED);
  EXPECT_NE(r.message.find("frobnicate"), std::string::npos) << r.message;
}

TEST(Errors, WrongOutputShapeNamesOpNodeAndTensor) {
  std::vector<Tensor> y = {out(TDM_F32, {2, 2})};
  auto r = run("add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {1, 2, 3})}, y, {}, "block1.residual");
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_EQ(r.failed_at, Stage::Prepare);
  EXPECT_NE(r.message.find("op 'add'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("block1.residual"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("output 0"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("f32[2,3]"), std::string::npos) << r.message;  // expected
  EXPECT_NE(r.message.find("f32[2,2]"), std::string::npos) << r.message;  // got
}

TEST(Errors, MalformedDescriptions) {
  std::vector<Tensor> y = {out(TDM_F32, {2, 2})};
  // mixed dtypes
  EXPECT_EQ(run("add", {f32({2, 2}, {1, 2, 3, 4}), s32({2, 2}, {1, 2, 3, 4})}, y).status,
            TDM_INVALID_ARGUMENT);
  // shapes that do not broadcast
  EXPECT_EQ(run("add", {f32({2, 2}, {1, 2, 3, 4}), f32({3}, {1, 2, 3})}, y).status, TDM_INVALID_ARGUMENT);
  // wrong input count
  EXPECT_EQ(run("add", {f32({2, 2}, {1, 2, 3, 4})}, y).status, TDM_INVALID_ARGUMENT);
  // matmul inner dims
  EXPECT_EQ(run("matmul", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 2}, {1, 2, 3, 4})}, y).status,
            TDM_INVALID_ARGUMENT);
  // unknown enum attribute
  auto r = run("linear", {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 2, 3, 4}), absent()}, y,
               {attr("activation", "swish")});
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("swish"), std::string::npos) << r.message;
  // attribute of the wrong type
  EXPECT_EQ(run("softmax", {f32({2, 2}, {1, 2, 3, 4})}, y, {attr("axis", "last")}).status,
            TDM_INVALID_ARGUMENT);
  // dropout p out of range
  std::vector<Tensor> d = {out(TDM_F32, {1}), out(TDM_U8, {1})};
  EXPECT_EQ(run("dropout", {f32({1}, {1})}, d, {attr("p", 1.5)}).status, TDM_INVALID_ARGUMENT);
}

TEST(Errors, NegativeDimension) {
  std::vector<Tensor> y = {Tensor{TDM_F32, {-1}, {}}};
  auto r = run("relu", {Tensor{TDM_F32, {-1}, {}}}, y);
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("negative"), std::string::npos) << r.message;
}

TEST(Errors, MissingRequiredAttribute) {
  std::vector<Tensor> y = {out(TDM_F32, {1, 1, 1, 1})};
  auto r = run("max_pool2d", {f32({1, 1, 2, 2}, {1, 2, 3, 4})}, y);
  EXPECT_EQ(r.status, TDM_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("kernel"), std::string::npos) << r.message;
}
