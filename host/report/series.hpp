// The series pictures of a run show, named as TensorBoard tags: `tandem
// train --tensorboard` writes them under these names, `tandem report` reads
// them from metrics.jsonl (run_metrics.hpp) and draws them.
#pragma once

namespace tandem::host::report::series {

// Per logged step (and at each epoch's end): running means over the epoch.
inline constexpr const char* kTrainLoss = "train/loss";
inline constexpr const char* kTrainAccuracy = "train/accuracy";
inline constexpr const char* kLearningRate = "lr";
inline constexpr const char* kSamplesPerSecond = "samples_per_second";
inline constexpr const char* kDataWait = "data_wait";  // share of step time spent waiting for data
// At each epoch's end, on the validation set (else the test set).
inline constexpr const char* kEvalLoss = "eval/loss";
inline constexpr const char* kEvalAccuracy = "eval/accuracy";
inline constexpr const char* kEvalPerplexity = "eval/perplexity";      // language models
inline constexpr const char* kEvalBitsPerByte = "eval/bits_per_byte";  // byte-level language models

}  // namespace tandem::host::report::series
