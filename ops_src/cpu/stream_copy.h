// Row copies with non-temporal (cache-bypassing) stores, shared by the kernels that move rows into
// outputs much larger than the caches (the output is not read before it is overwritten, so
// bypassing the caches saves reading every destination line first).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace ascend_moe::cpu {

// memcpy with non-temporal stores where the CPU has them (SSE2 on x86-64). The caller issues
// StoreFence() before the data is handed to another thread.
inline void StreamCopy(unsigned char* dst, const unsigned char* src, size_t n) {
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
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(src) + i + 512),
                 _MM_HINT_NTA);
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


// Orders the non-temporal stores before the data is handed to another thread.
inline void StoreFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace ascend_moe::cpu
