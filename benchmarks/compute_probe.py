"""The core's arithmetic peak, measured: chains of independent multiply-adds in the widest vectors
the compiler targets for this CPU (-march=native), per kind of arithmetic the expert kernels use.

- ``fp32``: float32 FMAs (``vfmadd`` on 512-bit vectors with AVX-512, else 256-bit with AVX2 + FMA,
  else scalar); FLOP/s, 2 per multiply-add.
- ``int8``: unsigned x signed byte products summed into int32, as integer-dot kernels do
  (``vpdpbusd`` with AVX-512 VNNI or AVX-VNNI, else AVX2's ``vpmaddubsw`` + ``vpmaddwd`` + ``vpaddd``);
  OP/s, 2 per multiply-add.
- ``bf16``: bfloat16 pair products summed into float32 (``vdpbf16ps``, AVX-512 BF16); absent
  without it (bfloat16 kernels then convert to float32 and run at the fp32 peak).

Each probe runs 12 independent accumulators (more than an FMA pipe's latency times its width on
current x86 cores), the best of a few short runs; ``peaks(threads)`` runs one probe per thread at
once (ctypes releases the GIL) and adds their rates. The source is compiled like the read probe's
(``read_probe.native_library``); None where no compiler builds it.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from .read_probe import native_library

KINDS = ("fp32", "int8", "bf16")
_SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
#define N 12
/* Each returns multiply-adds per second over `iters` rounds of N independent accumulators;
   *ops_per_madd is 2; the result is stored in *sink so that nothing is optimized away. */
double ascend_moe_fp32_madds(long iters, float* sink) {
#if defined(__AVX512F__)
  __m512 a[N]; const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-6f);
  for (int j = 0; j < N; ++j) a[j] = _mm512_set1_ps((float)j);
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
  const double t = now() - t0;
  for (int j = 0; j < N; ++j) *sink += _mm512_reduce_add_ps(a[j]);
  return (double)iters * N * 16 / t;
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 a[N]; const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-6f);
  for (int j = 0; j < N; ++j) a[j] = _mm256_set1_ps((float)j);
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
  const double t = now() - t0;
  float out[8];
  for (int j = 0; j < N; ++j) { _mm256_storeu_ps(out, a[j]); *sink += out[0]; }
  return (double)iters * N * 8 / t;
#else
  float a[N];
  for (int j = 0; j < N; ++j) a[j] = (float)j;
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = a[j] * 0.999f + 1e-6f;
  const double t = now() - t0;
  for (int j = 0; j < N; ++j) *sink += a[j];
  return (double)iters * N / t;
#endif
}
double ascend_moe_int8_madds(long iters, float* sink) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  __m512i a[N]; const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
  for (int j = 0; j < N; ++j) a[j] = _mm512_set1_epi32(j);
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = _mm512_dpbusd_epi32(a[j], u, s);
  const double t = now() - t0;
  for (int j = 0; j < N; ++j) *sink += (float)_mm512_reduce_add_epi32(a[j]);
  return (double)iters * N * 64 / t;
#elif defined(__AVXVNNI__)
  __m256i a[N]; const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-5);
  for (int j = 0; j < N; ++j) a[j] = _mm256_set1_epi32(j);
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = _mm256_dpbusd_avx_epi32(a[j], u, s);
  const double t = now() - t0;
  int32_t out[8];
  for (int j = 0; j < N; ++j) { _mm256_storeu_si256((__m256i*)out, a[j]); *sink += (float)out[0]; }
  return (double)iters * N * 32 / t;
#elif defined(__AVX2__)
  /* the byte products do not depend on the accumulators: the empty asm makes u new in every
     round and each chain has its own s, so that the compiler can neither hoist nor share them */
  __m256i a[N], s[N]; __m256i u = _mm256_set1_epi8(3); const __m256i one = _mm256_set1_epi16(1);
  for (int j = 0; j < N; ++j) { a[j] = _mm256_set1_epi32(j); s[j] = _mm256_set1_epi8((char)(j - 6)); }
  const double t0 = now();
  for (long i = 0; i < iters; ++i) {
    __asm__("" : "+x"(u));
    for (int j = 0; j < N; ++j)
      a[j] = _mm256_add_epi32(a[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s[j]), one));
  }
  const double t = now() - t0;
  int32_t out[8];
  for (int j = 0; j < N; ++j) { _mm256_storeu_si256((__m256i*)out, a[j]); *sink += (float)out[0]; }
  return (double)iters * N * 32 / t;
#else
  int32_t a[N];
  for (int j = 0; j < N; ++j) a[j] = j;
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] += (int32_t)(uint8_t)(3 + i) * (int8_t)(-5);
  const double t = now() - t0;
  for (int j = 0; j < N; ++j) *sink += (float)a[j];
  return (double)iters * N / t;
#endif
}
double ascend_moe_bf16_madds(long iters, float* sink) {
#if defined(__AVX512BF16__)
  __m512 a[N]; const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3380);
  for (int j = 0; j < N; ++j) a[j] = _mm512_set1_ps((float)j);
  const double t0 = now();
  for (long i = 0; i < iters; ++i)
    for (int j = 0; j < N; ++j) a[j] = _mm512_dpbf16_ps(a[j], b, c);
  const double t = now() - t0;
  for (int j = 0; j < N; ++j) *sink += _mm512_reduce_add_ps(a[j]);
  return (double)iters * N * 32 / t;
#else
  (void)iters; (void)sink;
  return 0.0;
#endif
}
"""


@functools.cache
def _library():
    lib = native_library(_SOURCE, "ascend_moe_compute_probe")
    if lib is None:
        return None
    for kind in KINDS:
        fn = getattr(lib, f"ascend_moe_{kind}_madds")
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_float)]
    return lib


def peak(kind: str, threads: int = 1, iters: int = 200_000, runs: int = 5) -> float | None:
    """Peak rate of ``kind`` (KINDS) in operations per second (2 per multiply-add) on ``threads``
    cores at once, the best of ``runs``; None where the probe is absent or the CPU lacks ``kind``."""
    lib = _library()
    if lib is None:
        return None
    fn = getattr(lib, f"ascend_moe_{kind}_madds")
    best = 0.0
    for _ in range(runs):
        best = max(best, 2 * sum(_concurrently(fn, iters, threads)))
    return best or None


def _concurrently(fn, iters: int, threads: int) -> list[float]:
    """``fn(iters, sink)`` on ``threads`` threads at once; each one's rate."""
    rates = [0.0] * threads
    sinks = [ctypes.c_float(0) for _ in range(threads)]

    def probe(i: int) -> None:
        rates[i] = fn(iters, ctypes.byref(sinks[i]))

    workers = [threading.Thread(target=probe, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return rates


def peaks(threads: int = 1) -> dict[str, float | None]:
    """``peak`` of every kind on ``threads`` cores."""
    return {kind: peak(kind, threads) for kind in KINDS}
