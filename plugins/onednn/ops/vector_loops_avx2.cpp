// oneDNN backend — the element-wise loops (vector_loops.hpp) for AVX2 + FMA:
// compiled with -march=haswell (plugins/onednn/CMakeLists.txt), called only
// when oneDNN's effective ISA allows it (vector_loops.cpp).
#define TANDEM_LOOPS_LEVEL avx2
#include "vector_loops_body.hpp"
