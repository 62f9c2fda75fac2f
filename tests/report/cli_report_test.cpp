// `tandem report` and `tandem train --tensorboard` as a user runs them:
// two trained runs overlaid in one self-contained page, the placement of a
// run of two devices, the event file against metrics.jsonl, and every bad
// input refused with its name, exit code 4 and no file written.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>

#include "event_file_reader.hpp"
#include "report_support.hpp"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

using ReportCli = ReportTest;

TEST_F(ReportCli, OverlaysTwoRunsInOneSelfContainedPage) {
  const std::string a = train("a"), b = train("b", "--set train.lr=0.02");
  CliRun r = tandem("report " + a + " " + b);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "wrote " + a + "/report.html (2 runs)");
  const std::string html = read_file(a + "/report.html");
  for (const char* id : kChartIds) {
    const std::string svg = chart_svg(html, id);
    ASSERT_FALSE(svg.empty()) << "no chart '" << id << "' in " << a << "/report.html";
    for (const char* run : {"0", "1"})
      EXPECT_TRUE(
          std::regex_search(svg, std::regex(std::string("data-run=\"") + run +
                                            "\">\\s*<polyline class=\"line\" points=\"[0-9.]+,[0-9.]+ ")))
          << "chart '" << id << "' has no line of run " << run << ":\n"
          << svg;
    EXPECT_EQ(svg.find("no data"), std::string::npos) << id;
  }
  // Evaluation: a marker per epoch and run on the loss and accuracy charts.
  EXPECT_HAS(chart_svg(html, "loss"), "<g class=\"series eval\" data-run=\"1\">");
  EXPECT_HAS(html, "<ul class=\"legend\">");
  EXPECT_HAS(html, "</span>" + a + "</li>");
  EXPECT_HAS(html, "</span>" + b + "</li>");
  EXPECT_HAS(html, "<table class=\"memory\">");
  EXPECT_TRUE(std::regex_search(html, std::regex("<td>reference:0</td><td class=\"n\">[0-9.]+ [KM]iB</td>")))
      << "no memory row of reference:0";
  // One device: nothing placed, and no placement recorded.
  EXPECT_HAS(html, "Every run trained on one device");
  EXPECT_EQ(read_file(a + "/metrics.jsonl").find("\"placement\""), std::string::npos);
  // Self-contained: nothing fetched, nothing run.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

TEST_F(ReportCli, OutputReplacesAFileAtomically) {
  const std::string a = train("a");
  std::ofstream(dir.file("out.html")) << "an older report";
  CliRun r = tandem("report " + a + " --output " + dir.file("out.html"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(read_file(dir.file("out.html")), "<svg class=\"chart\" id=\"loss\"");
  EXPECT_FALSE(fs::exists(a + "/report.html"));
  for (const auto& entry : fs::directory_iterator(dir.file("")))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST_F(ReportCli, BadRunDirectoriesAreNamedAndNothingIsWritten) {
  const std::string a = train("a");
  fs::create_directories(dir.file("no-metrics"));
  fs::create_directories(dir.file("torn"));
  std::ofstream(dir.file("torn/metrics.jsonl"))
      << "{\"event\":\"step\",\"step\":1,\"loss\":1}\n{\"event\":\"st";
  std::ofstream(dir.file("out.html")) << "unchanged";
  const struct {
    std::string args, says;
  } cases[] = {
      {a + " " + dir.file("missing"), dir.file("missing") + ": no such directory"},
      {a + " " + dir.file("no-metrics"), dir.file("no-metrics") + " holds no metrics.jsonl"},
      {dir.file("torn") + " " + a, dir.file("torn") + "/metrics.jsonl:2: not valid JSON"},
  };
  for (const auto& c : cases) {
    CliRun r = tandem("report " + c.args + " --output " + dir.file("out.html"));
    EXPECT_EQ(r.code, 4) << r.output;
    EXPECT_HAS(r.output, "tandem: error: " + c.says);
    EXPECT_HAS(r.output, "no report was written");
    EXPECT_EQ(read_file(dir.file("out.html")), "unchanged");
  }
  CliRun torn = tandem("report " + dir.file("torn"));
  EXPECT_EQ(torn.code, 4) << torn.output;
  EXPECT_HAS(torn.output, "delete or repair that line");
  EXPECT_FALSE(fs::exists(dir.file("torn/report.html")));
  CliRun none = tandem("report");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_HAS(none.output, "report needs a run directory");
  CliRun into_dir = tandem("report " + a + " --output " + dir.file("no-metrics"));
  EXPECT_EQ(into_dir.code, 2) << into_dir.output;
  EXPECT_HAS(into_dir.output, "--output " + dir.file("no-metrics") + ": is a directory");
  CliRun unwritable = tandem("report " + a + " --output " + dir.file("out.html/x.html"));
  EXPECT_EQ(unwritable.code, 4) << unwritable.output;
  EXPECT_HAS(unwritable.output, "cannot write the report: " + dir.file("out.html/x.html"));
}

TEST_F(ReportCli, IsListedAndHasHelp) {
  EXPECT_HAS(tandem("--help").output, "  report ");
  CliRun r = tandem("report --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_HAS(r.output, "Usage: tandem report RUN_DIR [RUN_DIR...]");
  EXPECT_HAS(r.output, "--output");
  EXPECT_HAS(r.output, "4  input, data or model file error");
  EXPECT_HAS(tandem("train --help").output, "--tensorboard");
}

// fc1 and fc3 on reference:0, fc2 on onednn:0: a placement record at the
// start of training, drawn as tables.
TEST_F(ReportCli, ShowsWhereARunOfTwoDevicesPutItsLayers) {
  std::string text = kSynthetic;
  const std::string fc1_end = "activation = \"relu\"\n";
  text.replace(text.find(fc1_end), fc1_end.size(),
               fc1_end + "device = \"reference:0\"\n[[layers]]\nname = \"mid\"\nop = \"linear\"\n" +
                   "out_features = 16\n" + fc1_end);
  const std::string m = model(text);
  CliRun r = tandem("train " + m + " --device onednn:0,reference:0 --placement pinned --set train.epochs=1 " +
                    "--run-dir " + dir.file("two"));
  if (r.output.find("no device matches 'onednn:0'") != std::string::npos) GTEST_SKIP() << "no onednn plugin";
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string metrics = read_file(dir.file("two/metrics.jsonl"));
  const std::string first = metrics.substr(0, metrics.find('\n'));
  const auto placement = nlohmann::json::parse(first);
  ASSERT_EQ(placement["event"], "placement") << "the first record: " << first;
  EXPECT_EQ(placement["mode"], "pinned");
  EXPECT_EQ(placement["layers"][0], (nlohmann::json{{"layer", "fc1"}, {"device", "reference:0"}}));
  EXPECT_EQ(placement["layers"][1], (nlohmann::json{{"layer", "mid"}, {"device", "onednn:0"}}));
  EXPECT_EQ(placement["layers"][2], (nlohmann::json{{"layer", "fc2"}, {"device", "onednn:0"}}));
  ASSERT_GE(placement["copies"].size(), 2u);  // forward into mid, backward out of it
  EXPECT_EQ(placement["copies_per_step"], placement["copies"].size());
  CliRun report = tandem("report " + dir.file("two"));
  ASSERT_EQ(report.code, 0) << report.output;
  const std::string html = read_file(dir.file("two/report.html"));
  EXPECT_HAS(html, "placement pinned, " + std::to_string(placement["copies"].size()) + " copies");
  EXPECT_HAS(html, "<td>mid</td><td>onednn:0</td>");
  EXPECT_HAS(html, "<table class=\"copies\">");
  EXPECT_HAS(html, "<td>onednn:0</td><td class=\"n\">");  // a memory row of each device
  EXPECT_HAS(html, "<td>reference:0</td><td class=\"n\">");
}

// A byte-level language model: its evaluation's perplexity and bits per
// byte get charts of their own, and TensorBoard scalars.
TEST_F(ReportCli, ALanguageModelHasPerplexityAndBitsPerByte) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the cat sat on the mat. ";
  std::ofstream(dir.file("text.txt")) << text;
  const std::string m = model(R"([model]
task = "language_model"
context = 8
vocab_size = 256
[[layers]]
name = "tok"
op = "embedding"
num_embeddings = 256
embedding_dim = 16
[[layers]]
name = "pos"
op = "position_embedding"
[[layers]]
name = "attn"
op = "attention"
heads = 2
[[layers]]
name = "head"
op = "linear"
out_features = 256
[train]
optimizer = "adamw"
lr = 0.01
batch_size = 8
steps = 16
log_every = 4
seed = 2
[data]
format = "tokens"
train_tokens = ")" + dir.file("text.txt") +
                              R"("
validation_split = 0.1
windows_per_epoch = 64
)");
  CliRun r = tandem("train " + m + " --device reference --run-dir " + dir.file("lm") + " --tensorboard " +
                    dir.file("tb"));
  ASSERT_EQ(r.code, 0) << r.output;
  CliRun report = tandem("report " + dir.file("lm"));
  ASSERT_EQ(report.code, 0) << report.output;
  const std::string html = read_file(dir.file("lm/report.html"));
  for (const char* id : {"perplexity", "bits-per-byte"}) {
    const std::string svg = chart_svg(html, id);
    ASSERT_FALSE(svg.empty()) << "no chart '" << id << "'";
    EXPECT_HAS(svg, "<circle class=\"point\"");  // one evaluation per epoch
    EXPECT_EQ(svg.find("no data"), std::string::npos) << id;
  }
  std::set<std::string> tags;
  for (const std::string& record : read_records(read_file(event_file(dir.file("tb")))))
    for (const DecodedValue& v : decode_event(record).values) tags.insert(v.tag);
  EXPECT_EQ(tags.count("eval/perplexity"), 1u);
  EXPECT_EQ(tags.count("eval/bits_per_byte"), 1u);
}

using TensorBoardCli = ReportTest;

TEST_F(TensorBoardCli, EventFileHoldsWhatMetricsJsonlHolds) {
  const std::string run = train("run", "--tensorboard " + dir.file("tb"));
  const std::string file = event_file(dir.file("tb"));
  ASSERT_FALSE(file.empty()) << "no events.out.tfevents.* in " << dir.file("tb");
  const auto records = read_records(read_file(file));
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(decode_event(records[0]).file_version, "brain.Event:2");
  Scalars written;
  for (size_t i = 1; i < records.size(); ++i) {
    const DecodedEvent e = decode_event(records[i]);
    EXPECT_GT(e.wall_time, 1.5e9);
    for (const DecodedValue& v : e.values) {
      EXPECT_EQ(written[v.tag].count(e.step), 0u) << v.tag << " twice at step " << e.step;
      written[v.tag][e.step] = v.simple_value;
    }
  }
  const Scalars expected = scalars_in_metrics(run);
  ASSERT_EQ(written.size(), expected.size());
  for (const auto& [tag, values] : expected) {
    ASSERT_EQ(written[tag].size(), values.size()) << tag;
    for (const auto& [step, value] : values)
      EXPECT_NEAR(written[tag][step], value, 1e-6 * std::max(1.0, std::abs(value))) << tag << " at " << step;
  }
  EXPECT_EQ(expected.at("train/loss").size(), 16u);  // 64 steps, logged every 4
  EXPECT_EQ(expected.at("eval/loss").size(), 2u);    // 2 epochs
}

TEST_F(TensorBoardCli, AnUnwritableDirectoryStopsTheRunBeforeTraining) {
  std::ofstream(dir.file("file")) << "x";
  const std::string m = model(kSynthetic);
  CliRun r = tandem("train " + m + " --device reference --run-dir " + dir.file("run") + " --tensorboard " +
                    dir.file("file/tb"));
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_HAS(r.output,
             "tandem: error: --tensorboard " + dir.file("file/tb") + ": cannot create the directory");
  EXPECT_HAS(r.output, "give a directory that can be written");
  EXPECT_EQ(r.output.find("epoch 1/"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tandem::test
