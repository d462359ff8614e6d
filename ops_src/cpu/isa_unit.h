// What a per-path translation unit (isa.h) includes before its target region: isa.h, and where
// the library has x86 paths the intrinsics and the standard headers the kernels' vector code uses.
#pragma once

#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#endif
