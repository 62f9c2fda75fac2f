// oneDNN backend — attention's tile loops for AVX-512: this file is compiled with
// -march=skylake-avx512 (plugins/onednn/CMakeLists.txt) and only called when
// oneDNN's effective ISA allows it (attention_tiles.cpp).
#define TANDEM_TILES_LEVEL avx512
#define TANDEM_TILES_COLS 32
#define TANDEM_TILES_ROWS 8
#include "attention_tiles_body.hpp"
