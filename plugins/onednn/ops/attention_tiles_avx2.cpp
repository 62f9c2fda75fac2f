// oneDNN backend — attention's tile loops for AVX2 + FMA: this file is compiled with
// -march=haswell (plugins/onednn/CMakeLists.txt) and only called when
// oneDNN's effective ISA allows it (attention_tiles.cpp).
#define TANDEM_TILES_LEVEL avx2
#define TANDEM_TILES_ROWS 6
#include "attention_tiles_body.hpp"
