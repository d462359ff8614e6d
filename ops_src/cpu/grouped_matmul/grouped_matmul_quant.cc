// Quantized paths of GroupedMatmul's CPU kernel (grouped_matmul.h, docs/operators.md §4.2):
// antiquant (float x, int8 / int4 weights) and W8A8 (int8 x and weights, int32 sums).
//
// A work item is one group's row block (up to 64 rows) times a range of output columns over the
// whole depth (all columns for [E, K, N] weights: contiguous rows), so every weight byte of a
// used group is read once per row block, in place, and no partial sums are needed. The tiles
// (grouped_matmul_quant_tiles.inc) are compiled three times on x86-64 with GCC: portable C++, AVX2 + FMA and
// AVX-512, chosen at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_paths.h"

namespace ascend_moe::cpu {

namespace {

constexpr int64_t kRowBlock = 64;                   // rows of one group per item
constexpr int64_t kRowTile = 4;                     // rows per pass over the weights
constexpr int64_t kItemBytes = int64_t{4 << 20};    // weight bytes per item (columns are split above it)
constexpr int64_t kTileBytes = int64_t{256 << 10};  // weight rows each row tile uses while they are in L2
// AVX-512 items with int4 [E, N, K] weights look each nibble up in its antiquant group's 16
// dequantized values (gmmq_avx512::NK4): 1.3-2.3x float32 at 1-128 rows per group, where the
// float32 panels below ran 0.9-1.1x (each against float32 in its own run of
// benchmarks/native/gmm_quant_micro; docs/quantization.md).
bool NibbleLookup(CpuIsa isa, const GroupedMatmulParams& p) {
  return kCpuX86Paths && isa == CpuIsa::kAvx512 && p.weight == GmmWeight::kInt4 && p.transpose_weight;
}
// Other antiquant items with int4 weights dequantize them once into float32 panels of about
// kTileBytes and run the float tiles on them: [E, N, K] weights always (5x the dot products over
// nibbles at 1 row, 20x from 16), [E, K, N] ones from kDequantRowsKN4 rows (0.7-0.97x at 8-16,
// 1.15-1.5x from 32); fewer rows widen the nibbles in registers for each row tile. int8 weights
// never: their tiles ran 1.0-2x the float tiles on float32 panels at 1-256 rows, both layouts
// (benchmarks/grouped_matmul_quant.py, docs/quantization.md).
constexpr int64_t kDequantRowsKN4 = 32;
bool DequantOnce(const GroupedMatmulParams& p, int64_t rows) {
  return p.weight == GmmWeight::kInt4 && (p.transpose_weight || rows >= kDequantRowsKN4);
}

// Weight bytes per 1000 elements: the int4 words hold two per byte.
int64_t MilliBytes(GmmWeight w) { return w == GmmWeight::kInt4 ? 500 : 1000; }

// Rows of k per pass of every row tile ([E, K, N] weights): one pass when one row tile holds all
// rows, else blocks of about kTileBytes (a multiple of 8 rows), so that each block is read from
// DRAM once and reused from L2 by the next row tiles.
int64_t KBlock(const GroupedMatmulParams& p, int64_t rows) {
  if (rows <= kRowTile) return p.depth;
  return std::max<int64_t>(8,
                           kTileBytes * 1000 / std::max<int64_t>(1, p.cols * MilliBytes(p.weight)) / 8 * 8);
}

// fn(r, tt, ka, kb, out) for every row tile [r, r + tt) and k block [ka, kb) of [k0, k1): the first
// block writes the row tile's sums straight into acc (the tiles need zeros there), later ones into
// a zeroed `part` that is then added (a tile's accumulators may hold its own lane order until it
// returns).
template <class T, class Fn>
void OverRowTilesAndKBlocks(int64_t rows, int64_t k0, int64_t k1, int64_t kblock, int64_t width, T* acc,
                            Fn fn) {
  std::vector<T> part;
  for (int64_t ka = k0; ka < k1; ka += kblock) {
    const int64_t kb = std::min(k1, ka + kblock);
    for (int64_t r = 0; r < rows; r += kRowTile) {
      const int tt = static_cast<int>(std::min(kRowTile, rows - r));
      T* out = acc + r * width;
      if (ka == k0) {
        fn(r, tt, ka, kb, out);
        continue;
      }
      part.assign(static_cast<size_t>(tt * width), T{0});
      fn(r, tt, ka, kb, part.data());
      for (int64_t i = 0; i < tt * width; ++i) out[i] += part[i];
    }
  }
}

}  // namespace

void GroupedMatmulPlan::BuildQuantItems() {
  const int64_t K = p_.depth, N = p_.cols;
  const int64_t bytes = K * N * MilliBytes(p_.weight) / 1000;  // of one group
  int64_t width = N;
  // [E, K, N] weights: whole rows (a column range would read short strided runs, which DRAM
  // serves slower); [E, N, K]: column ranges of about kItemBytes (whole weight rows each)
  if (p_.transpose_weight && bytes > kItemBytes) {
    width =
        std::max<int64_t>(64, kItemBytes * 1000 / std::max<int64_t>(1, K * MilliBytes(p_.weight)) / 64 * 64);
  }
  for (int64_t s = 0; s < active_groups(); ++s) {
    const Segment& seg = segments_[static_cast<size_t>(s)];
    for (int64_t r = seg.begin; r < seg.end; r += kRowBlock) {
      for (int64_t n = 0; n < N; n += width) {
        items_.push_back({s, 0, K, r, std::min(seg.end, r + kRowBlock), n, std::min(N, n + width)});
      }
    }
  }
}

namespace {

// temp (rows x width) = the sums over k in [k0, k1) of x * w (w as signed ints) of one group's
// weights `w` (its first byte) for columns [n0, n1).
void AntiquantSums(CpuIsa isa, const GroupedMatmulParams& p, const void* w, int64_t k0, int64_t k1,
                   int64_t n0, int64_t n1, const float* const* X, int64_t rows, float* temp) {
  const int64_t K = p.depth, N = p.cols, width = n1 - n0;
  std::fill(temp, temp + rows * width, 0.f);
  const bool int4 = p.weight == GmmWeight::kInt4;
  const auto* w8 = static_cast<const int8_t*>(w);
  const auto* w4 = static_cast<const uint8_t*>(w);
  if (p.transpose_weight) {  // int8: int4 [E, N, K] weights always take DequantProducts
    GmmqNK8(isa, w8, K, k0, k1, n0, n1, X, rows, temp, width);
    return;
  }
  OverRowTilesAndKBlocks(rows, k0, k1, KBlock(p, rows), width, temp,
                         [&](int64_t r, int tt, int64_t ka, int64_t kb, float* out) {
                           if (int4) {
                             GmmqKN4(isa, tt, w4 + n0 / 2, N / 2, ka, kb, X + r, out, width, width);
                           } else {
                             GmmqKN8(isa, tt, w8 + n0, N, ka, kb, X + r, out, width, width);
                           }
                         });
}

// Offsets and scales of group e's antiquant group g, columns [n0, n0 + width) (offsets 0
// without antiquant_offset).
void ReadAntiquant(const GroupedMatmulParams& p, const GroupedMatmulBuffers& b, int64_t e, int64_t g,
                   int64_t n0, int64_t width, float* offset, float* scale) {
  const int64_t at = (e * p.antiquant_groups + g) * p.cols + n0;
  GmmReadRun(b.antiquant_scale, p.antiquant_type, at, width, scale);
  if (b.antiquant_offset == nullptr) {
    std::fill(offset, offset + width, 0.f);
  } else {
    GmmReadRun(b.antiquant_offset, p.antiquant_type, at, width, offset);
  }
}

// Weight rows of the float32 panel DequantProducts fills: k rows of the item's columns ([E, K, N])
// or whole weight rows ([E, N, K]), about kTileBytes, at least 4 rows.
int64_t PanelRows(const GroupedMatmulParams& p, int64_t width) {
  const int64_t row = p.transpose_weight ? p.depth : width;
  return std::max<int64_t>(4, kTileBytes / std::max<int64_t>(1, 4 * row) / 4 * 4);
}

// out (rows x width) = the rows X times group e's int4 weights (their first byte `w`) dequantized
// as (w + offset) * scale, columns [n0, n1): each panel of PanelRows weight rows is dequantized
// once into `panel` and read by every row tile from L2.
void DequantProducts(CpuIsa isa, const GroupedMatmulParams& p, const GroupedMatmulBuffers& b, int64_t e,
                     const void* w, int64_t n0, int64_t n1, const float* const* X, int64_t rows, float* out,
                     float* panel) {
  const int64_t K = p.depth, N = p.cols, width = n1 - n0, step = K / p.antiquant_groups;
  const int64_t block = PanelRows(p, width);
  const auto* w4 = static_cast<const uint8_t*>(w);
  if (p.transpose_weight) {
    const int64_t G = p.antiquant_groups;
    std::vector<float> offset(static_cast<size_t>(G * block)), scale(offset.size());  // [G, block]
    for (int64_t na = n0; na < n1; na += block) {
      const int64_t nb = std::min(n1, na + block);
      for (int64_t g = 0; g < G; ++g)
        ReadAntiquant(p, b, e, g, na, nb - na, &offset[g * block], &scale[g * block]);
      for (int64_t n = na; n < nb; ++n) {
        float* row = panel + (n - na) * K;
        for (int64_t g = 0; g < G; ++g) {
          const size_t at = static_cast<size_t>(g * block + n - na);
          GmmqDequantRun4(isa, w4 + (n * K + g * step) / 2, offset[at], scale[at], step, row + g * step);
        }
      }
      GmmFloatNK(isa, panel, K, 0, nb - na, X, rows, out + (na - n0), width);
    }
    return;
  }
  std::fill(out, out + rows * width, 0.f);
  std::vector<float> offset(static_cast<size_t>(width)), scale(offset.size());
  std::vector<const float*> Xk(static_cast<size_t>(rows));
  int64_t loaded = -1;  // the antiquant group in offset / scale
  for (int64_t ka = 0; ka < K; ka += block) {
    const int64_t kb = std::min(K, ka + block);
    for (int64_t k = ka; k < kb; ++k) {
      if (k / step != loaded) {
        loaded = k / step;
        ReadAntiquant(p, b, e, loaded, n0, width, offset.data(), scale.data());
      }
      float* row = panel + (k - ka) * width;
      GmmqDequantRow4(isa, w4 + (k * N + n0) / 2, offset.data(), scale.data(), width, row);
    }
    for (int64_t r = 0; r < rows; ++r) Xk[r] = X[r] + ka;
    for (int64_t r = 0; r < rows; r += kRowTile) {
      const int tt = static_cast<int>(std::min(kRowTile, rows - r));
      GmmFloatKN(isa, tt, panel, width, 0, kb - ka, Xk.data() + r, out + r * width, width, width);
    }
  }
}

// Element (k, n) of one group's int8 or int4 weights `w` (its first byte) as an integer.
int WeightAt(const GroupedMatmulParams& p, const void* w, int64_t k, int64_t n) {
  const int64_t i = p.transpose_weight ? n * p.depth + k : k * p.cols + n;
  if (p.weight == GmmWeight::kInt8) return static_cast<const int8_t*>(w)[i];
  const uint8_t byte = static_cast<const uint8_t*>(w)[i / 2];
  const int nibble = (i % 2 == 0 ? byte : byte >> 4) & 0xF;  // element 2j in the low nibble
  return nibble >= 8 ? nibble - 16 : nibble;
}

// o[c] += the part of antiquant group [k0, k1) of row x for columns [n0, n0 + width), summed as
// the contract states it, x[k] * ((w[k, n] + offset[c]) * scale[c]), in float64. For rows whose
// sum of x is not finite (an inf or NaN in x, or an overflow), where the reformulation
// scale * (sum x*w + offset * sum x) would make 0 * inf a NaN the contract does not have.
void ExactAntiquantRow(const GroupedMatmulParams& p, const void* w, int64_t k0, int64_t k1, int64_t n0,
                       int64_t width, const float* x, const float* offset, const float* scale, float* o) {
  for (int64_t c = 0; c < width; ++c) {
    double sum = 0.0;
    for (int64_t k = k0; k < k1; ++k) {
      const double weight = (static_cast<double>(WeightAt(p, w, k, n0 + c)) + offset[c]) * scale[c];
      sum += static_cast<double>(x[k]) * weight;
    }
    o[c] += static_cast<float>(sum);
  }
}

}  // namespace

void GroupedMatmulPlan::RunQuantItem(const GroupedMatmulBuffers& b, const Item& item,
                                     std::vector<float>& scratch) const {
  const Segment& seg = segments_[static_cast<size_t>(item.segment)];
  const int64_t K = p_.depth, N = p_.cols, rows = item.r1 - item.r0, width = item.n1 - item.n0;
  const int64_t e = seg.group;
  const int64_t group_bytes = K * N * MilliBytes(p_.weight) / 1000;
  const char* w = static_cast<const char*>(b.weight) + e * group_bytes;
  if (p_.type == GmmType::kInt8) {  // W8A8: exact int32 sums, then the dequant in WriteQuantRows
    std::vector<const int8_t*> X(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) X[r] = static_cast<const int8_t*>(b.x) + (item.r0 + r) * K;
    std::vector<int32_t> acc(static_cast<size_t>(rows * width), 0);
    const auto* w8 = reinterpret_cast<const int8_t*>(w);
    if (p_.transpose_weight) {
      GmmqNKInt(isa_, w8, K, item.n0, item.n1, X.data(), rows, acc.data(), width);
    } else {
      OverRowTilesAndKBlocks(rows, int64_t{0}, K, KBlock(p_, rows), width, acc.data(),
                             [&](int64_t r, int tt, int64_t ka, int64_t kb, int32_t* out) {
                               GmmqKNInt(isa_, tt, w8 + item.n0, N, ka, kb, X.data() + r, out, width, width);
                             });
    }
    WriteQuantRows(b, seg, item.r0, rows, item.n0, width, acc.data());
    return;
  }
  // antiquant: per antiquant group, sums of x * w folded in as scale * (sums + offset * sum of x)
  const float* x = p_.type == GmmType::kFloat32 ? static_cast<const float*>(b.x) : x32_.data();
  std::vector<const float*> X(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) X[r] = x + (item.r0 + r) * K;
  if (NibbleLookup(isa_, p_)) {
    const int64_t G = p_.antiquant_groups;
    scratch.resize(static_cast<size_t>((rows + 2 * G) * width));
    float* offset = scratch.data() + rows * width;
    float* scale = offset + G * width;
    for (int64_t g = 0; g < G; ++g)
      ReadAntiquant(p_, b, e, g, item.n0, width, offset + g * width, scale + g * width);
    if constexpr (kCpuX86Paths) {
      gmmq_avx512::NK4(reinterpret_cast<const uint8_t*>(w), K, G, item.n0, item.n1, offset, scale, width,
                       X.data(), rows, scratch.data(), width);
    }
    WriteRows(b, seg, item.r0, rows, item.n0, width, scratch.data());
    return;
  }
  if (DequantOnce(p_, rows)) {
    const int64_t panel = PanelRows(p_, width) * (p_.transpose_weight ? K : width);
    scratch.resize(static_cast<size_t>(rows * width + panel));
    DequantProducts(isa_, p_, b, e, w, item.n0, item.n1, X.data(), rows, scratch.data(),
                    scratch.data() + rows * width);
    WriteRows(b, seg, item.r0, rows, item.n0, width, scratch.data());
    return;
  }
  scratch.assign(static_cast<size_t>(2 * rows * width), 0.f);
  float* out = scratch.data();
  float* temp = out + rows * width;
  const int64_t G = p_.antiquant_groups, step = K / G;
  // int4 tiles sum x times the nibbles read unsigned (w + 8): the 8 joins the offset
  const bool int4 = p_.weight == GmmWeight::kInt4;
  const bool xsums = int4 || b.antiquant_offset != nullptr;
  std::vector<float> scale(static_cast<size_t>(width)), offset(static_cast<size_t>(width)),
      tile_offset(static_cast<size_t>(width));
  for (int64_t g = 0; g < G; ++g) {
    const int64_t k0 = g * step, k1 = k0 + step;
    AntiquantSums(isa_, p_, w, k0, k1, item.n0, item.n1, X.data(), rows, temp);
    ReadAntiquant(p_, b, e, g, item.n0, width, offset.data(), scale.data());
    for (int64_t c = 0; c < width; ++c) tile_offset[c] = offset[c] - (int4 ? 8.f : 0.f);
    for (int64_t r = 0; r < rows; ++r) {
      float xsum = 0.f;
      if (xsums) {
        for (int64_t k = k0; k < k1; ++k) xsum += X[r][k];
      }
      float* o = out + r * width;
      if (!std::isfinite(xsum)) {  // checked once per row and group: finite rows keep the sums
        ExactAntiquantRow(p_, w, k0, k1, item.n0, width, X[r], offset.data(), scale.data(), o);
        continue;
      }
      const float* t = temp + r * width;
      for (int64_t c = 0; c < width; ++c) o[c] += scale[c] * (t[c] + tile_offset[c] * xsum);
    }
  }
  WriteRows(b, seg, item.r0, rows, item.n0, width, out);
}

void GroupedMatmulPlan::WriteQuantRows(const GroupedMatmulBuffers& b, const Segment& seg, int64_t r0,
                                       int64_t rows, int64_t n0, int64_t width, const int32_t* acc) const {
  const int64_t N = p_.cols;
  const auto* bias = static_cast<const int32_t*>(b.bias);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t y0 = (r0 + r) * N + n0;
    // float64 products, rounded once: the NumPy reference's order, so the same bits
    const double token = b.per_token_scale == nullptr ? 1.0 : b.per_token_scale[r0 + r];
    for (int64_t c = 0; c < width; ++c) {
      const int32_t v = acc[r * width + c] + (bias == nullptr ? 0 : bias[seg.group * N + n0 + c]);
      if (p_.out_type == GmmType::kInt32) {
        static_cast<int32_t*>(b.y)[y0 + c] = v;
        continue;
      }
      double y = v;
      if (b.scale != nullptr)
        y *= static_cast<double>(GmmReadAt(b.scale, p_.scale_type, seg.group * N + n0 + c));
      if (b.per_token_scale != nullptr) y *= token;
      GmmWriteAt(b.y, p_.out_type, y0 + c, static_cast<float>(y));
    }
  }
}

}  // namespace ascend_moe::cpu
