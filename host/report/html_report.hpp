// `tandem report`: one self-contained HTML page of one or more runs. The
// charts over steps (loss, accuracy, a language model's perplexity and
// bits per byte, learning rate, samples/s, data wait) overlay the runs, one
// colour each; below them the memory per device (planned and measured) and,
// for runs of several devices, where each layer ran and the copies.
#pragma once

#include <string>
#include <vector>

#include "report/run_metrics.hpp"

namespace tandem::host::report {

std::string render_report(const std::vector<RunMetrics>& runs);

}  // namespace tandem::host::report
