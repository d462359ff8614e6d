#include "ops_src/cpu/moe_re_routing.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace ascend_moe::cpu {

namespace {

// memcpy with non-temporal stores where the CPU has them (SSE2 on x86-64). The caller issues
// StoreFence() before the data is handed to another thread.
void StreamCopy(unsigned char* dst, const unsigned char* src, size_t n) {
#if defined(__SSE2__)
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  head = std::min(head, n);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    // Reading 512 bytes ahead keeps enough loads in flight to match glibc's large memcpy
    // (address arithmetic on integers: it may point past the end, where prefetches are harmless).
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(src) + i + 512), _MM_HINT_NTA);
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + body, src + body, n - body);
#else
  std::memcpy(dst, src, n);
#endif
}

// memcpy by a 64-byte unrolled SSE2 loop (the tail by memcpy), for the token blocks. glibc's memcpy, on the
// blocks of a permutation (kilobytes to hundreds of kilobytes, consecutive calls jumping in the source),
// measured 8-16% slower on AMD Zen 4 (docs/kernel.md: its size dispatch takes `rep movsb` there); one copy of
// the whole 2 MiB runs as fast as this loop. On AMD Zen 3 it is the other way round (glibc 2.36 too): this
// loop 6-10% slower than memcpy per block, so CopyRows takes it only where it was measured faster
// (UseCopyLoop).
void CopyLoop(unsigned char* dst, const unsigned char* src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

// Whether CopyRows takes CopyLoop for the token blocks: on AMD CPUs with AVX-512 (Zen 4 and later, where the
// loop was measured faster than glibc's memcpy on the blocks of a permutation), not elsewhere (Zen 3: memcpy
// measured faster; other CPUs: memcpy, as before the loop). ASCEND_MOE_REROUTING_COPY=loop or =memcpy (read
// once) overrides it, for tests and benchmarks. The result is the same bytes.
bool ChooseCopyLoop() {
  const char* env = std::getenv("ASCEND_MOE_REROUTING_COPY");
  if (env != nullptr && std::strcmp(env, "loop") == 0) return true;
  if (env != nullptr && std::strcmp(env, "memcpy") == 0) return false;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

bool UseCopyLoop() {
  static const bool loop = ChooseCopyLoop();
  return loop;
}

inline void StoreFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

inline int64_t ReadCount(const void* counts, CountType type, int64_t i) {
  if (type == CountType::kInt32) return static_cast<const int32_t*>(counts)[i];
  return static_cast<const int64_t*>(counts)[i];
}

inline void WriteCount(void* out, CountType type, int64_t i, int64_t v) {
  if (type == CountType::kInt32)
    static_cast<int32_t*>(out)[i] = static_cast<int32_t>(v);
  else
    static_cast<int64_t*>(out)[i] = v;
}

}  // namespace

bool MoeReRoutingLayout::Build(const MoeReRoutingParams& params, const void* counts) {
  const int64_t n = params.num_ranks, e = params.num_experts, a = params.num_tokens;
  if (n < 1 || e < 1 || a < 0 || a > std::numeric_limits<int32_t>::max()) return false;
  if (n > std::numeric_limits<int64_t>::max() / e) return false;
  const int64_t blocks = n * e;
  if (counts == nullptr && blocks > 0) return false;

  // Pass 1 (row-major, the source order): check, and take the source offsets. Any running sum
  // above A is already wrong, so the sums never overflow.
  std::vector<int64_t> src(static_cast<size_t>(blocks));
  std::vector<int64_t> totals(static_cast<size_t>(e), 0);
  int64_t running = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t x = 0; x < e; ++x) {
      const int64_t c = ReadCount(counts, params.count_type, r * e + x);
      if (c < 0 || c > a - running) return false;
      src[static_cast<size_t>(x * n + r)] = running;
      running += c;
      totals[static_cast<size_t>(x)] += c;
    }
  }
  if (running != a) return false;

  // Pass 2 (expert-major, the destination order).
  std::vector<int64_t> dst(static_cast<size_t>(blocks) + 1);
  running = 0;
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t r = 0; r < n; ++r) {
      dst[static_cast<size_t>(x * n + r)] = running;
      running += ReadCount(counts, params.count_type, r * e + x);
    }
  }
  dst[static_cast<size_t>(blocks)] = running;

  params_ = params;
  src_begin_ = std::move(src);
  dst_begin_ = std::move(dst);
  expert_totals_ = std::move(totals);
  return true;
}

void MoeReRoutingLayout::WriteExpertTokenNum(void* out) const {
  if (out == nullptr) return;
  int64_t running = 0;
  for (size_t x = 0; x < expert_totals_.size(); ++x) {
    running += expert_totals_[x];
    const int64_t v = params_.expert_token_num_type == 0 ? running : expert_totals_[x];
    WriteCount(out, params_.count_type, static_cast<int64_t>(x), v);
  }
}

int64_t MoeReRoutingLayout::RowsPerChunk(int64_t chunk_bytes) const {
  // Saturating: an empty tensor may have rows too large to exist (huge H or S).
  int64_t per_row = static_cast<int64_t>(sizeof(int32_t));
  if (__builtin_add_overflow(per_row, params_.token_row_bytes, &per_row) ||
      (params_.has_scales && __builtin_add_overflow(per_row, params_.scale_row_bytes, &per_row))) {
    per_row = INT64_MAX;
  }
  return std::max<int64_t>(1, chunk_bytes / std::max<int64_t>(per_row, 1));
}

void MoeReRoutingLayout::CopyRows(const MoeReRoutingBuffers& b, int64_t begin, int64_t end) const {
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, params_.num_tokens);
  if (begin >= end) return;
  const size_t blocks = src_begin_.size();
  const size_t trb = static_cast<size_t>(params_.token_row_bytes);
  const size_t srb = static_cast<size_t>(params_.scale_row_bytes);
  const bool scales = params_.has_scales && srb > 0;
  const auto* tokens = static_cast<const unsigned char*>(b.tokens);
  auto* out_tokens = static_cast<unsigned char*>(b.permute_tokens);
  const auto* in_scales = static_cast<const unsigned char*>(b.scales);
  auto* out_scales = static_cast<unsigned char*>(b.permute_scales);
  int32_t* idx = b.permute_idx;
  const bool gather = params_.idx_type == 0;
  const bool loop = UseCopyLoop();

  // The last block starting at or before `begin` contains it (blocks tile [0, A) in order).
  size_t k = static_cast<size_t>(
      std::upper_bound(dst_begin_.begin(), dst_begin_.begin() + static_cast<std::ptrdiff_t>(blocks), begin) -
      dst_begin_.begin());
  k = k == 0 ? 0 : k - 1;
  for (; k < blocks && dst_begin_[k] < end; ++k) {
    const int64_t lo = std::max(begin, dst_begin_[k]);
    const int64_t hi = std::min(end, dst_begin_[k + 1]);
    if (hi <= lo) continue;
    const int64_t s = src_begin_[k] + (lo - dst_begin_[k]);
    const size_t rows = static_cast<size_t>(hi - lo);
    if (params_.streaming_stores) {
      StreamCopy(out_tokens + static_cast<size_t>(lo) * trb, tokens + static_cast<size_t>(s) * trb,
                 rows * trb);
    } else {
      unsigned char* d = out_tokens + static_cast<size_t>(lo) * trb;
      const unsigned char* src = tokens + static_cast<size_t>(s) * trb;
      if (loop) {
        CopyLoop(d, src, rows * trb);
      } else {
        std::memcpy(d, src, rows * trb);
      }
    }
    if (scales) {
      std::memcpy(out_scales + static_cast<size_t>(lo) * srb, in_scales + static_cast<size_t>(s) * srb,
                  rows * srb);
    }
    if (idx != nullptr) {
      if (gather) {
        int32_t* o = idx + lo;
        const int32_t s32 = static_cast<int32_t>(s);
        for (size_t i = 0; i < rows; ++i) o[i] = s32 + static_cast<int32_t>(i);
      } else {
        int32_t* o = idx + s;
        const int32_t lo32 = static_cast<int32_t>(lo);
        for (size_t i = 0; i < rows; ++i) o[i] = lo32 + static_cast<int32_t>(i);
      }
    }
  }
  if (params_.streaming_stores) StoreFence();
}

bool MoeReRouting(const MoeReRoutingParams& params, const void* counts, const MoeReRoutingBuffers& buffers,
                  void* expert_token_num) {
  MoeReRoutingLayout layout;
  if (!layout.Build(params, counts)) return false;
  layout.WriteExpertTokenNum(expert_token_num);
  layout.CopyRows(buffers, 0, layout.num_rows());
  return true;
}

}  // namespace ascend_moe::cpu
