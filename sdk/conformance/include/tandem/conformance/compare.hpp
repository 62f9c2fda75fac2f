// Tandem conformance kit — comparing a candidate's output with the oracle's,
// and the tolerance table.
//
// Error metric, per element (as benchdnn does): absolute where the expected
// value is small, relative where it is large,
//     err = |got - expected| / max(1, |expected|).
// An element passes when err <= tol. NaN never passes (on either side); an
// infinity passes only when both sides hold the same infinity.
#ifndef TANDEM_CONFORMANCE_COMPARE_HPP
#define TANDEM_CONFORMANCE_COMPARE_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/conformance/host_tensor.hpp"
#include "tandem/op_catalog.hpp"

namespace tandem::conformance {

struct Comparison {
  bool pass = true;
  double max_err = 0;  // worst element's err (inf for NaN or a mismatch in shape)
  double tol = 0;
  int64_t worst_index = -1;  // flat index of the worst element, -1 if none
  double got = 0, expected = 0;
  std::string message;  // on failure: what differs, in words
};

Comparison compare(const HostTensor& got, const HostTensor& expected, double tol);

// Tolerance classes: every catalog op declares one in the catalog
// (tandem/op_catalog_entries.hpp); tolerance.cpp has the table with the
// reason behind each number.
using OpClass = catalog::Tolerance;

OpClass op_class(const std::string& op);
const char* op_class_name(OpClass c) noexcept;

// Tolerance for an output of `dtype` produced by `op`, whose elements each
// sum `k` products or terms (0 when nothing is accumulated). Integer and
// boolean outputs (labels, masks, s32 arithmetic) are always exact.
double tolerance(const std::string& op, tdm_dtype dtype, int64_t k);

// The table, printable (tandem-conformance --list prints it).
std::string tolerance_table();

}  // namespace tandem::conformance

#endif
