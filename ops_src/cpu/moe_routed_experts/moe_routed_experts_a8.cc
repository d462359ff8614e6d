// MoeRoutedExperts with int8 activations: repacking, the plan, the quantization of rows and the
// path dispatch. See moe_routed_experts_a8.h and docs/quantization.md (W8A8 and W4A8).
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "ops_src/cpu/enum_names.h"
#include "ops_src/cpu/isa.h"

namespace ascend_moe::cpu {

namespace experts_a8_scalar {
A8BlocksFn Blocks;
}
#if ASCEND_MOE_CPU_X86_PATHS
namespace experts_a8_maddubs {
A8BlocksFn Blocks;
}
namespace experts_a8_emulated_vnni {
A8BlocksFn Blocks;
}
namespace experts_a8_avxvnni {
A8BlocksFn Blocks;
}
namespace experts_a8_avx512vnni {
A8BlocksFn Blocks;
}
#endif

namespace {

constexpr EnumName<A8Dot> kA8DotNames[] = {{A8Dot::kScalar, "scalar"},
                                           {A8Dot::kMaddubs, "maddubs"},
                                           {A8Dot::kAvxVnni, "avxvnni"},
                                           {A8Dot::kAvx512Vnni, "avx512vnni"},
                                           {A8Dot::kEmulatedVnni, "emulated-vnni"}};

constexpr int64_t kRowsPerBlock = 8;
constexpr int64_t kBlocksPerUpItem = 8;  // 64 gate/up rows (32 intermediate rows) per phase-1 item

A8BlocksFn* BlocksOf(A8Dot dot) {
#if ASCEND_MOE_CPU_X86_PATHS
  switch (dot) {
    case A8Dot::kMaddubs:
      return &experts_a8_maddubs::Blocks;
    case A8Dot::kEmulatedVnni:
      return &experts_a8_emulated_vnni::Blocks;
    case A8Dot::kAvxVnni:
      return &experts_a8_avxvnni::Blocks;
    case A8Dot::kAvx512Vnni:
      return &experts_a8_avx512vnni::Blocks;
    default:
      break;
  }
#endif
  (void)dot;
  return &experts_a8_scalar::Blocks;
}

bool CpuRunsDot(A8Dot dot) {
  switch (dot) {
    case A8Dot::kScalar:
      return true;
    case A8Dot::kMaddubs:
    case A8Dot::kEmulatedVnni:
      return kCpuX86Paths && CpuRuns(CpuIsa::kAvx2);
    case A8Dot::kAvxVnni:
      return kCpuX86Paths && CpuHasAvxVnni();
    case A8Dot::kAvx512Vnni:
      return kCpuX86Paths && CpuRuns(CpuIsa::kAvx512) && CpuHasAvx512Vnni();
  }
  return false;
}

bool ParseDot(std::string_view name, A8Dot* dot) { return ParseName(kA8DotNames, name, dot); }

// Quantizes v[0, K) (docs/quantization.md: scale = max |v| / 127, q = round half to even of v / scale,
// clamped to [-127, 127]; zeros: q = 0; NaN or inf anywhere: q = 0 and a NaN scale) into q[0,
// K_pad) (zero padded) and each group's sum of q; returns the scale.
float QuantizeRow(const float* v, int64_t K, int64_t K_pad, int64_t group, int8_t* q, int32_t* sums) {
  bool finite = true;
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) {
    const float a = std::fabs(v[k]);
    if (!(a <= FLT_MAX)) {
      finite = false;
    } else if (a > amax) {
      amax = a;
    }
  }
  const float scale = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
  if (scale > 0.f) {
    // nearbyint(d) as (d + 1.5 * 2^23) - 1.5 * 2^23: the addition rounds d to an integer in the
    // current mode, exactly as nearbyint does for |d| < 2^22; larger |d| (only from a denormal
    // scale) stay beyond +-127 and clamp alike. A libm call per value otherwise (no SSE4.1 round
    // in the baseline build): 5 ns a value, 11 % of a 256-token W8A8 call on one thread.
    constexpr float kRound = 12582912.f;
    for (int64_t k = 0; k < K; ++k) {
      const float r = (v[k] / scale + kRound) - kRound;
      q[k] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, r)));
    }
  } else {
    std::fill(q, q + K, int8_t{0});
  }
  std::fill(q + K, q + K_pad, int8_t{0});
  for (int64_t g = 0; g * group < K_pad; ++g) {
    int32_t s = 0;
    for (int64_t k = g * group; k < (g + 1) * group; ++k) s += q[k];
    sums[g] = s;
  }
  return scale;
}

A8Matrix ExpertMatrix(const A8Weights& w, int64_t e) {
  A8Matrix m;
  m.w = w.w.data() + e * w.blocks * w.block_bytes;
  m.scales = w.scales.data() + e * w.blocks * w.groups * kRowsPerBlock;
  m.block_bytes = w.block_bytes;
  m.inputs_pad = w.inputs_pad;
  m.group = w.group;
  m.groups = w.groups;
  m.bits = w.bits;
  m.offset = w.bits == 4 ? 8 : (w.int8_offset ? 128 : 0);
  return m;
}

}  // namespace

const char* A8DotName(A8Dot dot) { return NameOf(kA8DotNames, dot, "?"); }

A8Dot ActiveA8Dot() {
  static const A8Dot forced = [] {
    A8Dot d = A8Dot::kAvx512Vnni;
    const char* name = std::getenv("ASCEND_MOE_CPU_A8_DOT");
    if (name == nullptr || !ParseDot(name, &d)) return A8Dot::kAvx512Vnni;  // no override
    return d;
  }();
  const CpuIsa isa = ActiveCpuIsa();
  A8Dot best = A8Dot::kScalar;
  if (isa == CpuIsa::kAvx512 && CpuRunsDot(A8Dot::kAvx512Vnni)) {
    best = A8Dot::kAvx512Vnni;
  } else if (isa != CpuIsa::kBaseline && CpuRunsDot(A8Dot::kAvxVnni)) {
    best = A8Dot::kAvxVnni;
  } else if (isa != CpuIsa::kBaseline && CpuRunsDot(A8Dot::kMaddubs)) {
    best = A8Dot::kMaddubs;
  }
  if (forced != A8Dot::kAvx512Vnni && CpuRunsDot(forced) &&
      (isa != CpuIsa::kBaseline || forced == A8Dot::kScalar)) {
    return forced;
  }
  return best;
}

A8Weights RepackA8(const int8_t* q, const float* scales, int bits, int64_t block_size, int64_t E, int64_t N,
                   int64_t K, A8Dot dot) {
  A8Weights w;
  w.bits = bits;
  w.int8_offset = bits == 8 && A8Int8Offset(dot);
  w.experts = E;
  w.rows = N;
  w.inputs = K;
  w.inputs_pad = (K + 7) / 8 * 8;
  w.group = block_size > 0 ? block_size : w.inputs_pad;
  w.groups = block_size > 0 ? K / block_size : 1;
  w.blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  w.block_bytes = w.inputs_pad * kRowsPerBlock * bits / 8;
  w.w.assign(static_cast<size_t>(E * w.blocks * w.block_bytes), 0);
  w.scales.assign(static_cast<size_t>(E * w.blocks * w.groups * kRowsPerBlock), 0.f);
  const int64_t row_bytes = bits == 4 ? K / 2 : K;
  const int zero = bits == 4 ? 8 : (w.int8_offset ? 128 : 0);  // the stored form of 0
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t b = 0; b < w.blocks; ++b) {
      uint8_t* dst = w.w.data() + (e * w.blocks + b) * w.block_bytes;
      float* sdst = w.scales.data() + (e * w.blocks + b) * w.groups * kRowsPerBlock;
      for (int64_t r = 0; r < kRowsPerBlock; ++r) {
        const int64_t n = b * kRowsPerBlock + r;
        const int8_t* src = n < N ? q + (e * N + n) * row_bytes : nullptr;
        auto value = [&](int64_t k) -> int {
          if (src == nullptr || k >= K) return 0;
          if (bits == 8) return src[k];
          const uint8_t byte = static_cast<uint8_t>(src[k / 2]);
          const int nib = (k % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          return nib >= 8 ? nib - 16 : nib;
        };
        for (int64_t k = 0; k < w.inputs_pad; ++k) {
          const int v = value(k) + zero;
          if (bits == 8) {
            dst[(k / 4) * 32 + r * 4 + (k % 4)] = static_cast<uint8_t>(v);
          } else {
            const int64_t j = k % 8;
            uint8_t& byte = dst[(k / 8) * 32 + r * 4 + (j % 4)];
            const auto held = static_cast<unsigned>(byte), nibble = static_cast<unsigned>(v);  // v in [0, 16)
            byte =
                static_cast<uint8_t>(j < 4 ? ((held & 0xF0U) | nibble) : ((held & 0x0FU) | (nibble << 4U)));
          }
        }
        if (src != nullptr) {
          for (int64_t g = 0; g < w.groups; ++g)
            sdst[g * kRowsPerBlock + r] = scales[(e * N + n) * w.groups + g];
        }
      }
    }
  }
  return w;
}

A8ExpertWeights RepackA8Experts(const MoeRoutedExpertsParams& p, const int8_t* gate_up_q,
                                const float* gate_up_scales, const int8_t* down_q, const float* down_scales,
                                A8Dot dot) {
  A8ExpertWeights w;
  w.dot = dot;
  w.gate_up =
      RepackA8(gate_up_q, gate_up_scales, p.quant_bits, p.block_size, p.experts, 2 * p.inter, p.hidden, dot);
  w.down = RepackA8(down_q, down_scales, p.quant_bits, p.block_size, p.experts, p.hidden, p.inter, dot);
  return w;
}

bool MoeRoutedExpertsA8Plan::Build(const MoeRoutedExpertsParams& params, const void* expert_idx, A8Dot dot,
                                   int64_t* bad_pair) {
  p_ = params;
  dot_ = dot;
  if (!SortPairsByExpert(params, expert_idx, &active_, &begin_, &pair_, bad_pair)) return false;
  const int64_t P = params.tokens * params.k;
  const int64_t up_blocks = (2 * params.inter + kRowsPerBlock - 1) / kRowsPerBlock;
  items_ = SplitExpertRows(begin_, up_blocks, kBlocksPerUpItem);
  h_pad_ = (params.hidden + 7) / 8 * 8;
  i_pad_ = (params.inter + 7) / 8 * 8;
  h_groups_ = params.block_size > 0 ? params.hidden / params.block_size : 1;
  i_groups_ = params.block_size > 0 ? params.inter / params.block_size : 1;
  qx_.resize(static_cast<size_t>(params.tokens * h_pad_));
  xsum_.resize(static_cast<size_t>(params.tokens * h_groups_));
  xscale_.resize(static_cast<size_t>(params.tokens));
  act_.resize(static_cast<size_t>(P * params.inter));
  qa_.resize(static_cast<size_t>(P * i_pad_));
  asum_.resize(static_cast<size_t>(P * i_groups_));
  ascale_.resize(static_cast<size_t>(P));
  return true;
}

void MoeRoutedExpertsA8Plan::QuantizeTokens(const float* x, int64_t begin, int64_t end) {
  const int64_t H = p_.hidden;
  const int64_t group = p_.block_size > 0 ? p_.block_size : h_pad_;
  for (int64_t t = begin; t < end; ++t) {
    xscale_[t] =
        QuantizeRow(x + t * H, H, h_pad_, group, qx_.data() + t * h_pad_, xsum_.data() + t * h_groups_);
  }
}

void MoeRoutedExpertsA8Plan::UpItems(const A8ExpertWeights& w, int64_t begin, int64_t end) {
  const int64_t I = p_.inter, k = p_.k;
  const float limit = p_.swiglu_limit;
  A8BlocksFn* const blocks = BlocksOf(dot_);
  constexpr int64_t kOutLd = kBlocksPerUpItem * kRowsPerBlock;
  std::vector<const int8_t*> X;
  std::vector<const int32_t*> S;
  std::vector<float> xs, out;
  for (int64_t it = begin; it < end; ++it) {
    const UpItem& item = items_[static_cast<size_t>(it)];
    const int64_t e = active_[static_cast<size_t>(item.expert)];
    const int64_t first = begin_[static_cast<size_t>(item.expert)];
    const int64_t n = begin_[static_cast<size_t>(item.expert) + 1] - first;
    X.resize(static_cast<size_t>(n));
    S.resize(static_cast<size_t>(n));
    xs.resize(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(n * kOutLd));
    for (int64_t q = 0; q < n; ++q) {
      const int64_t t = pair_[first + q] / k;
      X[q] = qx_.data() + t * h_pad_;
      S[q] = xsum_.data() + t * h_groups_;
      xs[q] = xscale_[t];
    }
    const A8Matrix m = ExpertMatrix(w.gate_up, e);
    blocks(m, item.begin, item.end - item.begin, X.data(), S.data(), xs.data(), n, out.data(), kOutLd);
    const int64_t i0 = item.begin * (kRowsPerBlock / 2);
    const int64_t i1 = std::min(I, item.end * (kRowsPerBlock / 2));
    {
      for (int64_t q = 0; q < n; ++q) {
        float* act = act_.data() + (first + q) * I;
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t j = i - i0;
          float g = out[q * kOutLd + 2 * j], u = out[q * kOutLd + 2 * j + 1];
          if (limit > 0.f) {
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
          }
          const float ex = static_cast<float>(std::exp(-static_cast<double>(g)));
          const float den = 1.f + ex;
          const float silu = g / den;
          act[i] = silu * u;
        }
      }
    }
  }
}

void MoeRoutedExpertsA8Plan::QuantizeActs(int64_t begin, int64_t end) {
  const int64_t I = p_.inter;
  const int64_t group = p_.block_size > 0 ? p_.block_size : i_pad_;
  for (int64_t s = begin; s < end; ++s) {
    ascale_[s] = QuantizeRow(act_.data() + s * I, I, i_pad_, group, qa_.data() + s * i_pad_,
                             asum_.data() + s * i_groups_);
  }
}

void MoeRoutedExpertsA8Plan::DownColumns(const A8ExpertWeights& w, const float* routing_weights, float* y,
                                         int64_t h0, int64_t h1) const {
  const int64_t H = p_.hidden, k = p_.k;
  for (int64_t t = 0; t < p_.tokens; ++t) std::fill(y + t * H + h0, y + t * H + h1, 0.f);
  A8BlocksFn* const blocks = BlocksOf(dot_);
  constexpr int64_t kChunkBlocks = 8;  // blocks per tile call (the out buffer: n x 64 values)
  constexpr int64_t kOutLd = kChunkBlocks * kRowsPerBlock;
  std::vector<const int8_t*> X;
  std::vector<const int32_t*> S;
  std::vector<float> out;
  for (size_t a = 0; a < active_.size(); ++a) {
    const int64_t e = active_[a];
    const int64_t first = begin_[a];
    const int64_t n = begin_[a + 1] - first;
    X.resize(static_cast<size_t>(n));
    S.resize(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(n * kOutLd));
    for (int64_t q = 0; q < n; ++q) {
      X[q] = qa_.data() + (first + q) * i_pad_;
      S[q] = asum_.data() + (first + q) * i_groups_;
    }
    const A8Matrix m = ExpertMatrix(w.down, e);
    const int64_t b_end = (h1 + kRowsPerBlock - 1) / kRowsPerBlock;
    for (int64_t b = h0 / kRowsPerBlock; b < b_end; b += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, b_end - b);
      blocks(m, b, nb, X.data(), S.data(), ascale_.data() + first, n, out.data(), kOutLd);
      const int64_t r_end = std::min(nb * kRowsPerBlock, h1 - b * kRowsPerBlock);
      for (int64_t q = 0; q < n; ++q) {
        const int64_t pair = pair_[first + q];
        const float rw = routing_weights[pair];
        float* yt = y + pair / k * H + b * kRowsPerBlock;
        const float* o = out.data() + q * kOutLd;
        for (int64_t r = 0; r < r_end; ++r) {
          const float term = rw * o[r];
          yt[r] = yt[r] + term;
        }
      }
    }
  }
}

int64_t MoeRoutedExpertsA8Plan::ColumnsPerChunk(int64_t bytes) const {
  return cpu::ColumnsPerChunk(p_.hidden, static_cast<int64_t>(active_.size()) * p_.inter * p_.quant_bits / 8,
                              bytes);
}

}  // namespace ascend_moe::cpu
