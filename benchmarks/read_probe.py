"""Single-core read bandwidth of plain streaming reads, for the model suite's bound.

On one core the DRAM read rate depends on how many streams are read side by side and how far
apart they are: float32 sums read as 4 streams, each a quarter of one 4 MiB block after another,
ran 16-19 GB/s where one stream ran 10-13 and 4 streams a quarter of the whole buffer apart 12-14
(torch.sum: one stream), on a Zen 3 server core; a kernel reading 4 streams side by side must not
beat its own bound. The probe is a few lines of C, compiled on first use with the machine's C
compiler for the machine's CPU (-march=native, else the default target) and loaded with ctypes
(Python cannot issue such reads itself); where no compiler works it is absent and the bound keeps
the torch probe alone.
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

STREAMS = (1, 4, 8)
BLOCK_FLOATS = 2**20  # 4 MiB: each block is read as S parts side by side

_SOURCE = r"""
#include <stddef.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* Best time of `calls` float sums over the whole blocks of p[0, n): each block of B floats read
   as S parts side by side (S streams B / S floats apart), the blocks one after another. */
#define PROBE(S)                                                                                 \
  double ascend_moe_read_seconds_##S(const float* p, size_t n, size_t B, int calls, float* sink) { \
    const size_t part = B / S / 64 * 64, whole = n / B * B;                                      \
    double best = 1e30;                                                                          \
    for (int c = 0; c < calls; ++c) {                                                            \
      float s[S][16] = {{0}};                                                                    \
      const double t0 = now();                                                                   \
      for (size_t b = 0; b < whole; b += B)                                                      \
        for (size_t i = 0; i < part; i += 16)                                                    \
          for (int k = 0; k < S; ++k)                                                            \
            for (int j = 0; j < 16; ++j) s[k][j] += p[b + k * part + i + j];                     \
      const double t = now() - t0;                                                               \
      if (t < best) best = t;                                                                    \
      for (int k = 0; k < S; ++k)                                                                \
        for (int j = 0; j < 16; ++j) *sink += s[k][j];                                           \
    }                                                                                            \
    return best;                                                                                 \
  }
PROBE(1)
PROBE(4)
PROBE(8)
"""

def native_library(source: str, stem: str):
    """``source`` (C) compiled with the machine's C compiler for its CPU (-march=native, else the
    default target) into a shared library cached in the temporary folder under ``stem`` and a hash
    of the source, loaded with ctypes; None where no compiler builds it."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        return None
    tag = hashlib.sha256(source.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"{stem}_{tag}_{os.getuid()}.so")
    if not os.path.exists(path):
        src = path[:-3] + ".c"
        with open(src, "w", encoding="ascii") as f:
            f.write(source)
        tmp = f"{path}.{os.getpid()}"
        for flags in (["-march=native"], []):
            done = subprocess.run([cc, "-O3", *flags, "-shared", "-fPIC", src, "-o", tmp], capture_output=True)
            if done.returncode == 0:
                break
        else:
            return None
        os.replace(tmp, path)
    return ctypes.CDLL(path)


@functools.cache
def _library():
    """The compiled probe (ctypes), or None where no C compiler builds it."""
    lib = native_library(_SOURCE, "ascend_moe_read_probe")
    if lib is None:
        return None
    for s in STREAMS:
        fn = getattr(lib, f"ascend_moe_read_seconds_{s}")
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                       ctypes.POINTER(ctypes.c_float)]
    return lib


def read_rates(buf: np.ndarray, calls: int) -> dict[int, float]:
    """Read rate (B/s) of a float32 sum over ``buf`` (float32, contiguous; its whole BLOCK_FLOATS
    blocks, all of it when smaller) per stream count (``STREAMS``), the best of ``calls``; {} where
    the probe is absent."""
    lib = _library()
    if lib is None:
        return {}
    assert buf.dtype == np.float32 and buf.flags.c_contiguous
    block = min(BLOCK_FLOATS, buf.size)
    whole = buf.size // block * block
    sink = ctypes.c_float(0)
    out = {}
    for s in STREAMS:
        part = block // s // 64 * 64
        seconds = getattr(lib, f"ascend_moe_read_seconds_{s}")(buf.ctypes.data, buf.size, block, calls,
                                                               ctypes.byref(sink))
        out[s] = whole // block * part * s * 4 / seconds
    return out
