// oneDNN backend — the element-wise loops (vector_loops.hpp) for AVX-512:
// compiled with -march=skylake-avx512 (plugins/onednn/CMakeLists.txt),
// called only when oneDNN's effective ISA allows it (vector_loops.cpp).
#define TANDEM_LOOPS_LEVEL avx512
#define TANDEM_LOOPS_CHUNK 16  // the softmax rows' chunk: one register
#include "vector_loops_body.hpp"
