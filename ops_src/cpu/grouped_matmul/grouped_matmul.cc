// CPU kernel of GroupedMatmul. See the header and docs/operators.md §4.
//
// The tiles (grouped_matmul_tiles.inc) are compiled three times on x86-64 with GCC: portable C++,
// AVX2 + FMA + F16C and AVX-512F, chosen at run time, so the library runs on any x86-64 CPU. The
// paths differ only in the summation order of the products (a few float32 ulp).
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ASCEND_MOE_GMM_X86 1
#include <immintrin.h>
#else
#define ASCEND_MOE_GMM_X86 0
#endif

namespace ascend_moe::cpu {

namespace {

// 16-bit element types, told apart for the loaders' overloads.
struct Bf16 {
  uint16_t bits;
};
struct Fp16 {
  uint16_t bits;
};

inline float Widen(float v) { return v; }
inline float Widen(Bf16 v) { return Bf16ToFloat(v.bits); }
inline float Widen(Fp16 v) { return Fp16ToFloat(v.bits); }

#define ASCEND_MOE_GMM_LANES 4
namespace gmm_baseline {
#include "ops_src/cpu/grouped_matmul/grouped_matmul_tiles.inc"
}  // namespace gmm_baseline
#undef ASCEND_MOE_GMM_LANES

#if ASCEND_MOE_GMM_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define ASCEND_MOE_GMM_LANES 8
namespace gmm_avx2 {
#include "ops_src/cpu/grouped_matmul/grouped_matmul_tiles.inc"
}  // namespace gmm_avx2
#undef ASCEND_MOE_GMM_LANES
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
#pragma GCC diagnostic push
// GCC 12: the intrinsics' _mm512_undefined_ps() pass-through operands read as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ASCEND_MOE_GMM_LANES 16
namespace gmm_avx512 {
#include "ops_src/cpu/grouped_matmul/grouped_matmul_tiles.inc"
}  // namespace gmm_avx512
#undef ASCEND_MOE_GMM_LANES
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

constexpr int64_t kRowBlock = 64;                   // rows of one group whose accumulators live together
constexpr int64_t kRowTile = 4;                     // rows per pass over a weight tile
constexpr int64_t kTileBytes = int64_t{256 << 10};  // weight tile reused across a row block (L2)
constexpr int64_t kItemBytes = int64_t{4 << 20};    // default weight bytes per work item
// A group's k range is split only while its partial sums stay below this share of its weights.
constexpr int64_t kPartialShare = 16;

// The path: ActiveCpuIsa(), lowered to the baseline where the CPU lacks F16C (the AVX2 and
// AVX-512 tiles widen float16 with it).
CpuIsa GmmIsa() {
  static const bool f16c = [] {
#if ASCEND_MOE_GMM_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") != 0;
#else
    return false;
#endif
  }();
  const CpuIsa isa = ActiveCpuIsa();
  return f16c ? isa : CpuIsa::kBaseline;
}

int64_t ElementBytes(GmmType t) {
  switch (t) {
    case GmmType::kFloat16:
    case GmmType::kBFloat16:
      return 2;
    case GmmType::kInt8:
      return 1;
    default:
      return 4;
  }
}

}  // namespace

float GmmReadAt(const void* p, GmmType t, int64_t i) {
  switch (t) {
    case GmmType::kFloat16:
      return Fp16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case GmmType::kBFloat16:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

void GmmReadRun(const void* p, GmmType t, int64_t at, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(p) + at;
  switch (t) {
    case GmmType::kFloat16:
      for (int64_t j = 0; j < n; ++j) out[j] = Fp16ToFloat(h[j]);
      break;
    case GmmType::kBFloat16:
      for (int64_t j = 0; j < n; ++j) out[j] = Bf16ToFloat(h[j]);
      break;
    default:
      std::copy_n(static_cast<const float*>(p) + at, n, out);
  }
}

void GmmWriteAt(void* p, GmmType t, int64_t i, float v) {
  switch (t) {
    case GmmType::kFloat16:
      static_cast<uint16_t*>(p)[i] = FloatToFp16(v);
      break;
    case GmmType::kBFloat16:
      static_cast<uint16_t*>(p)[i] = FloatToBf16(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

namespace {

// acc[r * width + c] (zeroed here) = the products of rows X[0..rows) with the item's weights:
// depth range [k0, k1) and columns [n0, n1) ([E, K, N] layout: ldw = N), or rows [n0, n1) of w
// over the whole depth ([E, N, K] layout).
// The ISA build of the two float tiles (one dispatch for every caller).
template <class W>
void DotOn(CpuIsa isa, const W* w, int64_t K, int64_t n0, int64_t n1, const float* const* X, int64_t rows,
           float* acc, int64_t lda) {
  switch (isa) {
#if ASCEND_MOE_GMM_X86
    case CpuIsa::kAvx512:
      return gmm_avx512::Dot(w, K, n0, n1, X, rows, acc, lda);
    case CpuIsa::kAvx2:
      return gmm_avx2::Dot(w, K, n0, n1, X, rows, acc, lda);
#endif
    default:
      return gmm_baseline::Dot(w, K, n0, n1, X, rows, acc, lda);
  }
}

template <class W>
void AccumulateOn(CpuIsa isa, int rows, bool prefetch, const W* w, int64_t ldw, int64_t k0, int64_t k1,
                  const float* const* X, float* acc, int64_t lda, int64_t width) {
  switch (isa) {
#if ASCEND_MOE_GMM_X86
    case CpuIsa::kAvx512:
      return gmm_avx512::Accumulate(rows, prefetch, w, ldw, k0, k1, X, acc, lda, width);
    case CpuIsa::kAvx2:
      return gmm_avx2::Accumulate(rows, prefetch, w, ldw, k0, k1, X, acc, lda, width);
#endif
    default:
      return gmm_baseline::Accumulate(rows, prefetch, w, ldw, k0, k1, X, acc, lda, width);
  }
}

template <class W>
void BlockProducts(CpuIsa isa, bool transposed, const W* w, int64_t K, int64_t N, int64_t k0, int64_t k1,
                   int64_t n0, int64_t n1, const float* const* X, int64_t rows, float* acc) {
  const int64_t width = n1 - n0;
  std::fill(acc, acc + rows * width, 0.f);
  if (transposed) return DotOn(isa, w, K, n0, n1, X, rows, acc, width);
  // Few rows: one pass over the k range (no reuse to win). More: k tiles of about kTileBytes,
  // each used by every row tile while it is in L2.
  const int64_t tile_k =
      rows <= kRowTile
          ? k1 - k0
          : std::max<int64_t>(
                16, kTileBytes / std::max<int64_t>(1, width * static_cast<int64_t>(sizeof(W))) / 4 * 4);
  const W* wn = w + n0;
  for (int64_t t0 = k0; t0 < k1; t0 += tile_k) {
    const int64_t t1 = std::min(k1, t0 + tile_k);
    for (int64_t r = 0; r < rows; r += kRowTile) {
      const int tt = static_cast<int>(std::min(kRowTile, rows - r));
      const bool prefetch = r == 0;  // the first pass over a tile reads it from DRAM
      AccumulateOn(isa, tt, prefetch, wn, N, t0, t1, X + r, acc + r * width, width, width);
    }
  }
}

}  // namespace

void GmmFloatKN(CpuIsa isa, int rows, const float* w, int64_t ldw, int64_t k0, int64_t k1,
                const float* const* X, float* acc, int64_t lda, int64_t width) {
  AccumulateOn(isa, rows, false, w, ldw, k0, k1, X, acc, lda, width);
}

void GmmFloatNK(CpuIsa isa, const float* w, int64_t K, int64_t n0, int64_t n1, const float* const* X,
                int64_t rows, float* acc, int64_t lda) {
  DotOn(isa, w, K, n0, n1, X, rows, acc, lda);
}

bool GroupedMatmulPlan::UseIsa(CpuIsa isa) {
  if (!CpuRuns(isa)) return false;
  isa_ = isa;
  return true;
}

void GroupedMatmulPlan::Build(const GroupedMatmulParams& params, const int64_t* ends, int64_t item_bytes) {
  p_ = params;
  isa_ = GmmIsa();
  if (item_bytes <= 0) item_bytes = kItemBytes;
  const int64_t K = params.depth, N = params.cols, elem = ElementBytes(params.type);
  segments_.clear();
  items_.clear();
  split_.clear();
  int64_t begin = 0;
  for (int64_t e = 0; e < params.groups; ++e) {
    if (ends[e] > begin) segments_.push_back({e, begin, ends[e]});
    begin = std::max(begin, ends[e]);
  }
  covered_rows_ = begin;
  if (params.weight != GmmWeight::kSame) {
    BuildQuantItems();
    partial_.reset();
    return;
  }
  const int64_t weight_bytes = K * N * elem;  // of one group
  int64_t partial = 0;
  for (int64_t s = 0; s < active_groups(); ++s) {
    Segment& seg = segments_[static_cast<size_t>(s)];
    const int64_t m = seg.end - seg.begin;
    if (params.transpose_weight) {  // ranges of weight rows (output columns), contiguous
      const int64_t width = std::max<int64_t>(16, item_bytes / std::max<int64_t>(1, K * elem) / 16 * 16);
      for (int64_t n = 0; n < N; n += width)
        items_.push_back({s, 0, K, seg.begin, seg.end, n, std::min(N, n + width)});
    } else if (m > kRowBlock) {  // many rows: compute bound, split by rows
      for (int64_t r = seg.begin; r < seg.end; r += kRowBlock) {
        items_.push_back({s, 0, K, r, std::min(seg.end, r + kRowBlock), 0, N});
      }
    } else {  // ranges of whole weight rows, contiguous; partial sums when more than one
      const int64_t by_size = (weight_bytes + item_bytes - 1) / item_bytes;
      const int64_t by_partials = weight_bytes / std::max<int64_t>(1, kPartialShare * m * N * 4);
      const int64_t blocks = std::max<int64_t>(1, std::min({by_size, by_partials, K / 16}));
      seg.k_blocks = blocks;
      if (blocks == 1) {
        items_.push_back({s, 0, K, seg.begin, seg.end, 0, N});
        continue;
      }
      seg.partial = partial;
      for (int64_t i = 0; i < blocks; ++i) {
        items_.push_back({s, K * i / blocks, K * (i + 1) / blocks, seg.begin, seg.end, 0, N, partial});
        partial += m * N;
      }
      split_.push_back(s);
    }
  }
  partial_.reset(partial > 0 ? new float[static_cast<size_t>(partial)] : nullptr);
}

int64_t GroupedMatmulPlan::weight_bytes_read() const {
  const int64_t elements = active_groups() * p_.depth * p_.cols;
  switch (p_.weight) {
    case GmmWeight::kInt8:
      return elements;
    case GmmWeight::kInt4:
      return elements / 2;
    default:
      return elements * ElementBytes(p_.type);
  }
}

void GroupedMatmulPlan::Prepare(const GroupedMatmulBuffers& b) {
  const int64_t K = p_.depth, N = p_.cols;
  if (p_.type == GmmType::kFloat16 || p_.type == GmmType::kBFloat16) {
    x32_.resize(static_cast<size_t>(covered_rows_ * K));
    GmmReadRun(b.x, p_.type, 0, covered_rows_ * K, x32_.data());
  }
  // Rows past the group list's total are zero; an empty y may come with a null buffer.
  const int64_t bytes = ElementBytes(p_.out_type);
  const int64_t tail = (p_.rows - covered_rows_) * N * bytes;
  if (tail > 0)
    std::memset(static_cast<char*>(b.y) + covered_rows_ * N * bytes, 0, static_cast<size_t>(tail));
}

void GroupedMatmulPlan::WriteRows(const GroupedMatmulBuffers& b, const Segment& seg, int64_t r0, int64_t rows,
                                  int64_t n0, int64_t width, const float* acc) const {
  const int64_t N = p_.cols;
  const GmmType bias_type = p_.bias_float32 ? GmmType::kFloat32 : p_.type;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = acc + r * width;
    const int64_t y0 = (r0 + r) * N + n0;
    for (int64_t c = 0; c < width; ++c) {
      const float bias = b.bias == nullptr ? 0.f : GmmReadAt(b.bias, bias_type, seg.group * N + n0 + c);
      GmmWriteAt(b.y, p_.out_type, y0 + c, a[c] + bias);
    }
  }
}

void GroupedMatmulPlan::RunItems(const GroupedMatmulBuffers& b, int64_t begin, int64_t end) {
  const int64_t K = p_.depth, N = p_.cols;
  const float* x = p_.type == GmmType::kFloat32 ? static_cast<const float*>(b.x) : x32_.data();
  std::vector<float> scratch;
  std::vector<const float*> rows;
  for (int64_t it = begin; it < end; ++it) {
    const Item& item = items_[static_cast<size_t>(it)];
    if (p_.weight != GmmWeight::kSame) {
      RunQuantItem(b, item, scratch);
      continue;
    }
    const Segment& seg = segments_[static_cast<size_t>(item.segment)];
    const int64_t width = item.n1 - item.n0;
    const int64_t wofs = seg.group * K * N;
    // [E, N, K] items and row-split items hold all their rows at once only up to kRowBlock
    const int64_t block = item.partial >= 0 ? item.r1 - item.r0 : kRowBlock;
    for (int64_t r0 = item.r0; r0 < item.r1; r0 += block) {
      const int64_t n_rows = std::min(block, item.r1 - r0);
      rows.resize(static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) rows[r] = x + (r0 + r) * K;
      float* acc = item.partial >= 0 ? partial_.get() + item.partial : nullptr;
      if (acc == nullptr) {
        scratch.resize(static_cast<size_t>(n_rows * width));
        acc = scratch.data();
      }
      const bool t = p_.transpose_weight;
      switch (p_.type) {
        case GmmType::kFloat16:
          BlockProducts(isa_, t, static_cast<const Fp16*>(b.weight) + wofs, K, N, item.k0, item.k1, item.n0,
                        item.n1, rows.data(), n_rows, acc);
          break;
        case GmmType::kBFloat16:
          BlockProducts(isa_, t, static_cast<const Bf16*>(b.weight) + wofs, K, N, item.k0, item.k1, item.n0,
                        item.n1, rows.data(), n_rows, acc);
          break;
        default:
          BlockProducts(isa_, t, static_cast<const float*>(b.weight) + wofs, K, N, item.k0, item.k1, item.n0,
                        item.n1, rows.data(), n_rows, acc);
      }
      if (item.partial < 0) WriteRows(b, seg, r0, n_rows, item.n0, width, acc);
    }
  }
}

void GroupedMatmulPlan::FinishItems(const GroupedMatmulBuffers& b, int64_t begin, int64_t end) const {
  const int64_t N = p_.cols;
  std::vector<float> sum;
  for (int64_t i = begin; i < end; ++i) {
    const Segment& seg = segments_[static_cast<size_t>(split_[static_cast<size_t>(i)])];
    const int64_t m = seg.end - seg.begin, stride = m * N;
    const float* parts = partial_.get() + seg.partial;
    sum.assign(parts, parts + stride);
    for (int64_t kb = 1; kb < seg.k_blocks; ++kb) {  // in k order: the same sums for any thread count
      const float* p = parts + kb * stride;
      for (int64_t j = 0; j < stride; ++j) sum[j] += p[j];
    }
    WriteRows(b, seg, seg.begin, m, 0, N, sum.data());
  }
}

void GroupedMatmul(const GroupedMatmulParams& params, const GroupedMatmulBuffers& buffers,
                   const int64_t* ends) {
  GroupedMatmulPlan plan;
  plan.Build(params, ends);
  plan.Prepare(buffers);
  plan.RunItems(buffers, 0, plan.num_items());
  plan.FinishItems(buffers, 0, plan.num_finish_items());
}

}  // namespace ascend_moe::cpu
