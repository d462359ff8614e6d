// Conversion kernels are header-only (half.h); this unit keeps the CPU kernel library non-empty
// and checks the header compiles on its own.
#include "ops_src/cpu/half.h"
