"""Single-core read bandwidth of plain streaming reads, for the model suite's bound.

On one core the DRAM read rate depends on how many streams are read side by side: a float32 sum
read as 4 streams (a quarter of the buffer each) ran 16-18 GB/s where one stream ran 12-15
(torch.sum: one stream) on a Zen 3 server core, and a kernel reading 4 streams beats a bound taken
from one. The probe is a few lines of C, compiled on first use with the machine's C compiler and
loaded with ctypes (Python cannot issue such reads itself); where no compiler works it is absent
and the bound keeps the torch probe alone.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

STREAMS = (1, 4)

_SOURCE = r"""
#include <stddef.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* Best time of `calls` float sums over p[0, n) read as S streams side by side (S parts of n / S). */
#define PROBE(S)                                                                    \
  double ascend_moe_read_seconds_##S(const float* p, size_t n, int calls, float* sink) { \
    const size_t part = n / S / 64 * 64;                                            \
    double best = 1e30;                                                             \
    for (int c = 0; c < calls; ++c) {                                               \
      float s[S][16] = {{0}};                                                       \
      const double t0 = now();                                                      \
      for (size_t i = 0; i < part; i += 16)                                         \
        for (int k = 0; k < S; ++k)                                                 \
          for (int j = 0; j < 16; ++j) s[k][j] += p[k * part + i + j];              \
      const double t = now() - t0;                                                  \
      if (t < best) best = t;                                                       \
      for (int k = 0; k < S; ++k)                                                   \
        for (int j = 0; j < 16; ++j) *sink += s[k][j];                              \
    }                                                                               \
    return best * (double)n / (double)(part * S);                                   \
  }
PROBE(1)
PROBE(4)
"""


@functools.lru_cache(maxsize=None)
def _library():
    """The compiled probe (ctypes), or None where no C compiler builds it."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        return None
    tag = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"ascend_moe_read_probe_{tag}_{os.getuid()}.so")
    if not os.path.exists(path):
        src = path[:-3] + ".c"
        with open(src, "w", encoding="ascii") as f:
            f.write(_SOURCE)
        tmp = f"{path}.{os.getpid()}"
        done = subprocess.run([cc, "-O3", "-shared", "-fPIC", src, "-o", tmp], capture_output=True)
        if done.returncode != 0:
            return None
        os.replace(tmp, path)
    lib = ctypes.CDLL(path)
    for s in STREAMS:
        fn = getattr(lib, f"ascend_moe_read_seconds_{s}")
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return lib


def read_rates(buf: np.ndarray, calls: int) -> dict[int, float]:
    """Read rate (B/s) of a float32 sum over ``buf`` (float32, contiguous) per stream count
    (``STREAMS``), the best of ``calls``; {} where the probe is absent."""
    lib = _library()
    if lib is None:
        return {}
    assert buf.dtype == np.float32 and buf.flags.c_contiguous
    sink = ctypes.c_float(0)
    out = {}
    for s in STREAMS:
        seconds = getattr(lib, f"ascend_moe_read_seconds_{s}")(buf.ctypes.data, buf.size, calls, ctypes.byref(sink))
        out[s] = buf.size * 4 / seconds
    return out
