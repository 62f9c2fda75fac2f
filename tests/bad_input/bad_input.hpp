// The bad-input suite: each case is one mistake a user can make (a model
// file, a data file, a checkpoint, a plugin, a command line) and what
// `tandem` must do about it: exit non-zero (never by a signal), say
// "tandem: error:" with what names the file, key or layer, print no raw
// C++ exception text, and leave every file that was there unchanged.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace tandem::test {

struct BadInput {
  std::string name;               // the test's name: letters, digits, '_'
  std::string args;               // after `tandem`; "{d}" is the case's directory
  std::vector<std::string> says;  // each must appear in the output ("{d}" as above)
  int code = 0;                   // the exit code; 0: any non-zero
  // Writes what the case needs into its directory, after the base files.
  std::function<void(const std::string& dir)> setup;
};

std::ostream& operator<<(std::ostream& out, const BadInput& c);

// The base files every case starts from, in `dir`: model.toml (a small CNN
// on 8x8 IDX images of 4 classes), train-/test- images and labels, and
// data.csv with csv.toml (8 features, 4 classes).
void write_base_files(const std::string& dir);

// The base model file with `from` replaced by `to` (which must occur once).
std::string base_model_with(const std::string& from, const std::string& to);
extern const char* const kBaseModel;
extern const char* const kCsvModel;

// A checkpoint of the base model (trained once per process, 1 epoch on
// the reference backend), copied to `dest`.
void copy_trained_checkpoint(const std::string& dest);

// IDX files: images [n, rows, cols] u8 and labels [n] u8.
std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols);
std::string idx_labels(uint32_t n, uint32_t classes);

void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

// Runs the case and checks everything the suite promises.
void run_bad_input(const BadInput& c);

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

// "cases" into gtest parameter names.
struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<BadInput>& info) const { return info.param.name; }
};

}  // namespace tandem::test
