// The kit's plumbing: loader errors, the skip outcome, poisoning of
// unwritten outputs, the rerun check, and coverage of the op catalog.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tandem/conformance/runner.hpp"

namespace tc = tandem::conformance;

namespace {

// Op names of sdk/ops.md's signature table ("relu / gelu / tanh" rows split).
std::set<std::string> ops_md_names() {
  std::ifstream in(TANDEM_OPS_MD);
  std::set<std::string> names;
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) table = line.find("Signature summary") != std::string::npos;
    if (!table || line.rfind("| ", 0) != 0 || line.rfind("| ---", 0) == 0) continue;
    const std::string cell = line.substr(2, line.find(" |", 2) - 2);
    std::stringstream ss(cell);
    std::string name;
    while (std::getline(ss, name, '/')) {
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (name != "op") names.insert(name);
    }
  }
  return names;
}

std::unique_ptr<tc::PluginUnderTest> open_or_skip(const char* path) {
  tc::Outcome o;
  auto p = tc::PluginUnderTest::open(path, o);
  EXPECT_TRUE(p) << path << ": " << o.message;
  return p;
}

}  // namespace

TEST(Coverage, KitOpListMatchesOpsMd) {
  const std::set<std::string> md = ops_md_names();
  ASSERT_FALSE(md.empty()) << "could not read the signature table of " << TANDEM_OPS_MD;
  const std::set<std::string> kit(tc::catalog_ops().begin(), tc::catalog_ops().end());
  for (const std::string& op : md)
    EXPECT_TRUE(kit.count(op)) << op << " is in ops.md but not in the kit's list";
  for (const std::string& op : kit)
    EXPECT_TRUE(md.count(op)) << op << " is in the kit's list but not in ops.md";
}

TEST(Coverage, EveryCatalogOpHasCasesAndOnlyCatalogOps) {
  std::set<std::string> covered;
  const std::set<std::string> kit(tc::catalog_ops().begin(), tc::catalog_ops().end());
  for (const tc::Case& c : tc::catalogue()) {
    EXPECT_TRUE(kit.count(c.op)) << "case names unknown op " << c.op;
    covered.insert(c.op);
  }
  for (const std::string& op : tc::catalog_ops()) EXPECT_TRUE(covered.count(op)) << op << " has no case";
}

TEST(Coverage, CaseSeedsAreStableAndDistinct) {
  std::set<uint64_t> seeds;
  std::set<std::string> ids;
  for (const tc::Case& c : tc::catalogue()) {
    seeds.insert(c.seed());
    ids.insert(c.op + " " + tandem::dtype_name(c.dtype) + " " + c.label());
  }
  EXPECT_EQ(ids.size(), tc::catalogue().size()) << "two cases share a description";
  EXPECT_EQ(seeds.size(), tc::catalogue().size());
}

TEST(Loader, MissingFileGivesClearError) {
  tc::Outcome o;
  auto p = tc::PluginUnderTest::open("/nonexistent/libtandem-nothing.so", o);
  EXPECT_FALSE(p);
  EXPECT_EQ(o.status, tc::Status::error);
  EXPECT_NE(o.message.find("/nonexistent/libtandem-nothing.so"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("cannot load"), std::string::npos) << o.message;
}

TEST(Loader, NotAPluginGivesClearError) {
  Dl_info libc{};  // a shared library that is surely not a plugin: the C library's file
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&std::printf), &libc), 0);
  tc::Outcome o;
  auto p = tc::PluginUnderTest::open(libc.dli_fname, o);
  EXPECT_FALSE(p);
  EXPECT_NE(o.message.find("tdm_plugin_entry"), std::string::npos) << o.message;
}

TEST(Loader, UnavailableDeviceIsASkipWithReason) {
  tc::Outcome o;
  auto p = tc::PluginUnderTest::open(TANDEM_STANDIN_ABSENT, o);
  EXPECT_FALSE(p);
  EXPECT_EQ(o.status, tc::Status::skipped);
  EXPECT_NE(o.message.find("no accelerator"), std::string::npos) << o.message;
}

TEST(Driver, UnavailableDeviceExits77) {
  const std::string cmd =
      std::string(TANDEM_CONFORMANCE_DRIVER) + " --plugin " + TANDEM_STANDIN_ABSENT + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 77) << out;
  EXPECT_EQ(out.rfind("SKIPPED: ", 0), 0u) << out;
  EXPECT_NE(out.find("no accelerator"), std::string::npos) << out;
}

#ifdef TANDEM_REFERENCE_PLUGIN
// The summary says, per op, whether every case passed; a candidate that
// declines a dtype is listed with its counts per dtype instead.
TEST(Driver, SummaryCountsOpsThatPassedEveryCase) {
  const std::string cmd = std::string(TANDEM_CONFORMANCE_DRIVER) + " --plugin " + TANDEM_REFERENCE_PLUGIN +
                          " --reference " + TANDEM_REFERENCE_PLUGIN + " --op silu --op rms_norm 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(pipe)), 0) << out;
  EXPECT_NE(out.find("ops that passed every case: 2 of 2"), std::string::npos) << out;
  EXPECT_EQ(out.find("the others, by dtype"), std::string::npos) << out;
}

// A file named libtandem-reference.so beside the candidate is not the
// oracle (it could be anything, the candidate renamed): the driver uses the
// reference backend that came with it. (The candidate, a copy of reference,
// calls itself 'reference': the kit, as the host, needs --override-plugin.)
TEST(Driver, TheOracleIsNeverTakenFromTheCandidatesDirectory) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "kit-oracle";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TANDEM_REFERENCE_PLUGIN, dir / "libtandem-candidate.so",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(TANDEM_STANDIN_FAULTY, dir / "libtandem-reference.so",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string cmd = std::string(TANDEM_CONFORMANCE_DRIVER) + " --plugin " +
                          (dir / "libtandem-candidate.so").string() +
                          " --override-plugin reference --op relu 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(pipe)), 0) << out;
  EXPECT_EQ(out.find((dir / "libtandem-reference.so").string()), std::string::npos) << out;
  EXPECT_NE(out.find("warning: plugin 'reference' is " + (dir / "libtandem-candidate.so").string()),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}
#endif

TEST(RunOp, UnwrittenOutputIsPoisoned) {
  auto faulty = open_or_skip(TANDEM_STANDIN_FAULTY);
  ASSERT_TRUE(faulty);
  const auto a = tc::HostTensor::from_values(TDM_F32, {6}, {1, 2, 3, 4, 5, 6});
  tc::RunResult r = tc::run_op(*faulty, "add", {}, {a, a}, {{TDM_F32, {6}}});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(r.outputs[0].get(2), 6);
  EXPECT_TRUE(std::isnan(r.outputs[0].get(3)));  // never written: still the 0xFF poison
  EXPECT_FALSE(
      tc::compare(r.outputs[0], tc::HostTensor::from_values(TDM_F32, {6}, {2, 4, 6, 8, 10, 12}), 1).pass);
}

TEST(RunOp, UnsupportedCarriesThePluginsReason) {
  auto faulty = open_or_skip(TANDEM_STANDIN_FAULTY);
  ASSERT_TRUE(faulty);
  const auto a = tc::HostTensor::from_values(TDM_F32, {2}, {1, 2});
  tc::RunResult r = tc::run_op(*faulty, "tanh", {}, {a}, {{TDM_F32, {2}}});
  EXPECT_EQ(r.outcome.status, tc::Status::unsupported);
  EXPECT_NE(r.outcome.message.find("stand-in: no tanh"), std::string::npos) << r.outcome.message;
}

#ifdef TANDEM_REFERENCE_PLUGIN
class AgainstReference : public ::testing::Test {
 protected:
  void SetUp() override {
    faulty_ = open_or_skip(TANDEM_STANDIN_FAULTY);
    reference_ = open_or_skip(TANDEM_REFERENCE_PLUGIN);
    ASSERT_TRUE(faulty_ && reference_);
  }
  tc::CaseResult run(const std::string& op, std::vector<int64_t> dims) {
    tc::Case c(op, TDM_F32);
    c.in(TDM_F32, dims);
    if (op != "scale") c.in(TDM_F32, dims);
    c.out(TDM_F32, dims);
    if (op == "scale") c.attrs.number("alpha", 2);
    return tc::run_case(*faulty_, *reference_, c);
  }
  std::unique_ptr<tc::PluginUnderTest> faulty_, reference_;
};

TEST_F(AgainstReference, CorrectKernelPasses) {
  const tc::CaseResult r = run("mul", {3, 7});
  EXPECT_EQ(r.status, tc::Status::ok) << r.message;
  EXPECT_EQ(r.max_err, 0);
}

TEST_F(AgainstReference, HalfWrittenOutputFails) {
  const tc::CaseResult r = run("add", {3, 7});
  EXPECT_EQ(r.status, tc::Status::error);
  EXPECT_NE(r.message.find("NaN"), std::string::npos) << r.message;
}

TEST_F(AgainstReference, IrreproducibleKernelFails) {
  const tc::CaseResult r = run("scale", {9});
  EXPECT_EQ(r.status, tc::Status::error);
  EXPECT_NE(r.message.find("not reproducible"), std::string::npos) << r.message;
}

TEST_F(AgainstReference, InPlaceAliasingRunsOnReference) {
  // sgd_update with param_out = param: the kit passes one buffer for both.
  tc::Attrs a;
  const auto p = tc::HostTensor::from_values(TDM_F32, {3}, {1, 2, 3});
  const auto g = tc::HostTensor::from_values(TDM_F32, {3}, {1, 1, 1});
  const auto lr = tc::HostTensor::from_values(TDM_F32, {}, {0.5});
  tc::RunOptions in_place;
  in_place.in_place = {{0, 0}};
  tc::RunResult r = tc::run_op(*reference_, "sgd_update", a, {p, g, lr, tc::HostTensor()},
                               {{TDM_F32, {3}}, {TDM_DTYPE_INVALID, {}}}, in_place);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  EXPECT_EQ(r.outputs[0].get(0), 0.5);
  EXPECT_EQ(r.outputs[0].get(2), 2.5);
}
#endif

#ifdef TANDEM_REFERENCE_PLUGIN
// The dropout mask is fully specified by ops.md (a counter-based hash), so
// the kit can compare masks bit for bit: check the oracle against the text.
TEST_F(AgainstReference, DropoutMaskFollowsTheCatalogFormula) {
  const uint64_t seed = 987654321;
  const double p = 0.4;
  const tc::HostTensor x = tc::HostTensor::from_values(TDM_F32, {257}, std::vector<double>(257, 1.0));
  tc::Attrs a;
  a.number("p", p).integer("seed", int64_t(seed));
  tc::RunResult r = tc::run_op(*reference_, "dropout", a, {x}, {{TDM_F32, {257}}, {TDM_U8, {257}}});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
  for (uint64_t i = 0; i < 257; ++i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    const bool keep = double(z >> 40) * 0x1p-24 >= p;
    ASSERT_EQ(r.outputs[1].get(int64_t(i)), keep ? 1 : 0) << "element " << i;
    ASSERT_FLOAT_EQ(float(r.outputs[0].get(int64_t(i))), keep ? float(1 / (1 - p)) : 0.f) << "element " << i;
  }
}
#endif
