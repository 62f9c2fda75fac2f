#include "exec/collectives.hpp"

namespace tandem::host::exec {

bool is_collective_op(const std::string& op) {
  return op.rfind("comm.", 0) == 0;
}

}  // namespace tandem::host::exec
