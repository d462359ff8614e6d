// The read bound the native micro-benchmarks compare kernels with: the read rate of float sums
// over a buffer larger than the caches (benchmarks/read_probe.py has the streams and layouts
// tried; 4 streams a quarter of the whole buffer apart were slower).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

// Read rate (B/s) of float sums over `buf`, each 4 MiB block read as S parts side by side (the
// blocks one after another), best of `calls`, timed by `now` (wall or thread CPU seconds).
template <int S>
double ReadProbe(const std::vector<float>& buf, int calls, double (*now)()) {
  constexpr size_t kBlock = size_t{1} << 20;
  const size_t part = kBlock / S / 64 * 64, whole = buf.size() / kBlock * kBlock;
  double best = 1e30;
  volatile float sink = 0;
  for (int c = 0; c < calls; ++c) {
    const double t0 = now();
    float s[S][16] = {};
    for (size_t b = 0; b < whole; b += kBlock)
      for (size_t i = 0; i < part; i += 16)
        for (int p = 0; p < S; ++p)
          for (int j = 0; j < 16; ++j) s[p][j] += buf[b + p * part + i + j];
    for (auto& row : s)
      for (float v : row) sink = sink + v;
    best = std::min(best, now() - t0);
  }
  return whole / kBlock * part * S * 4.0 / best;
}
