// The checkpoint interval as written in [train] checkpoint_every and
// --checkpoint-every.
#include "model/checkpoint_every.hpp"

#include <gtest/gtest.h>

namespace tandem::host::model {
namespace {

TEST(CheckpointEvery, StepsTimesAndBoth) {
  struct Case {
    const char* text;
    int64_t steps;
    double seconds;
    const char* described;
  };
  for (const Case& c : {Case{"500", 500, 0, "every 500 steps"}, Case{"1 step", 1, 0, "every 1 steps"},
                        Case{" 500 steps ", 500, 0, "every 500 steps"}, Case{"90s", 0, 90, "every 90 s"},
                        Case{"15min", 0, 900, "every 15 min"}, Case{"1.5 h", 0, 5400, "every 90 min"},
                        Case{"500 steps, 15min", 500, 900, "every 500 steps or 15 min"},
                        Case{"2h,100", 100, 7200, "every 100 steps or 2 h"}}) {
    auto every = parse_checkpoint_every(c.text);
    ASSERT_TRUE(every.ok()) << c.text << ": " << every.error().message;
    EXPECT_EQ(every->steps, c.steps) << c.text;
    EXPECT_DOUBLE_EQ(every->seconds, c.seconds) << c.text;
    EXPECT_EQ(describe(*every), c.described) << c.text;
  }
}

TEST(CheckpointEvery, WhatIsNotAnIntervalSaysWhatIs) {
  for (const char* bad : {"", " ", "0", "-3", "2.5", "nan", "inf steps", "10 fortnights", "5min, 10min",
                          "10, 20", "min", "10 steps,", "1e400"}) {
    auto every = parse_checkpoint_every(bad);
    ASSERT_FALSE(every.ok()) << "'" << bad << "' was accepted";
    EXPECT_NE(every.error().message.find("is not a checkpoint interval"), std::string::npos)
        << every.error().message;
  }
  EXPECT_NE(parse_checkpoint_every("x").error().message.find("\"500 steps, 15min\""), std::string::npos);
}

}  // namespace
}  // namespace tandem::host::model
