// GroupedMatmul CPU kernel (docs/operators.md §4): rows of x grouped in contiguous segments, each
// segment times its group's weight matrix (plus bias), float32 accumulation.
//
// Bound by reading the weights at decode sizes, so each used group's weight is read in place
// exactly once per call (groups without rows are never touched), as long contiguous runs: with
// weight [E, K, N] a work item is a range of whole weight rows (k) of one group, read as 4 streams
// side by side, each weight vector applied to 4 rows of x at a time in registers; a group split
// over several k ranges sums them in float32 partials that a second pass adds up. Groups of many
// rows are split by rows instead and tile k so that each weight tile is reused from L2. With
// weight [E, N, K] an item is a range of weight rows (output columns), dot products as 4 streams.
// The split depends on the shapes only, never on the thread count, so neither do the results.
// AVX-512 / AVX2+FMA+F16C / baseline paths chosen at run time (ActiveCpuIsa()). Knows nothing of
// ONNX Runtime.
//
// Quantized weights (docs/operators.md §4.2): int8, or int4 packed 8 per int32 word (torch_npu's
// layout: element 8j+i in bits [4i, 4i+4) of word j), read in place and widened in registers.
// Antiquant (float x): per antiquant group of k rows, sums of x * w (signed ints) are folded
// into the output as scale * (sum + offset * sum of x); int4 weights on items of many rows (and
// always with [E, N, K] weights) are dequantized once into float32 panels, (w + offset) * scale,
// that the float tiles read from L2 (grouped_matmul_quant.cc). W8A8 (int8 x): exact int32 sums, then
// (sum + bias) * scale[n] * per_token_scale[r]. Quantized calls split work by output columns
// (whole k range per item, no partial sums).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops_src/cpu/attr_defaults.gen.h"
#include "ops_src/cpu/isa.h"

namespace ascend_moe::cpu {

// Element types of x, weight, y, bias and the scales.
enum class GmmType : int { kFloat32, kFloat16, kBFloat16, kInt8, kInt32 };
// What the weights hold: x's float type, int8, or int4 in int32 words.
enum class GmmWeight : int { kSame, kInt8, kInt4 };

struct GroupedMatmulParams {
  int64_t rows = 0;                  // M
  int64_t depth = 0;                 // K
  int64_t cols = 0;                  // N
  int64_t groups = 0;                // E
  GmmType type = GmmType::kFloat32;  // x's type
  bool bias_float32 = false;  // bias is float32 (else of `type`; int32 for int8 x); ignored without bias
  bool transpose_weight = attr_defaults::grouped_matmul::kTransposeWeight != 0;  // weight [E, N, K]
  GmmWeight weight = GmmWeight::kSame;
  GmmType out_type = GmmType::kFloat32;        // y's type (x's, or output_dtype's for int8 x)
  int64_t antiquant_groups = 1;                // G of antiquant_scale [E, G, N] (1: [E, N])
  GmmType antiquant_type = GmmType::kFloat32;  // of antiquant_scale / antiquant_offset (x's type)
  GmmType scale_type = GmmType::kFloat32;      // of scale (float32 or bfloat16)
};

struct GroupedMatmulBuffers {
  const void* x = nullptr;                 // [M, K]
  const void* weight = nullptr;            // [E, K, N], or [E, N, K] with transpose_weight
  const void* bias = nullptr;              // [E, N] or null
  const void* scale = nullptr;             // W8A8: [E, N] or null
  const void* antiquant_scale = nullptr;   // [E, G, N]
  const void* antiquant_offset = nullptr;  // [E, G, N] or null
  const float* per_token_scale = nullptr;  // W8A8: [M] or null
  void* y = nullptr;                       // [M, N]
};

// One element of a buffer of type t (not int8 / int32), widened / rounded to t.
float GmmReadAt(const void* p, GmmType t, int64_t i);
void GmmWriteAt(void* p, GmmType t, int64_t i, float v);
// out[j] = element at + j of p (type t) as float32, j < n: the type switch once per run.
void GmmReadRun(const void* p, GmmType t, int64_t at, int64_t n, float* out);

// The float32 tiles on float32 weights, for the quantized path's dequantized weight panels
// (grouped_matmul_quant.cc; weights just written, so no software prefetch). KN: acc[r * lda + c]
// += sum over k in [k0, k1) of X[r][k] * w[k * ldw + c], rows 1..4. NK: acc[r * lda + j] =
// dot(X[r], w row n0 + j) over K (w [N, K]).
void GmmFloatKN(CpuIsa isa, int rows, const float* w, int64_t ldw, int64_t k0, int64_t k1,
                const float* const* X, float* acc, int64_t lda, int64_t width);
void GmmFloatNK(CpuIsa isa, const float* w, int64_t K, int64_t n0, int64_t n1, const float* const* X,
                int64_t rows, float* acc, int64_t lda);

// One call's groups and work items.
class GroupedMatmulPlan {
 public:
  // `ends`: the E group ends, validated (non-decreasing, each <= M). `item_bytes`: weight bytes
  // per work item (0: the kernel's choice; tests and benchmarks vary it).
  void Build(const GroupedMatmulParams& params, const int64_t* ends, int64_t item_bytes = 0);

  // Serial part, before the items: x widened to float32 (float16 / bfloat16 x), y's rows after
  // the last group zeroed.
  void Prepare(const GroupedMatmulBuffers& b);

  // Work items [begin, end) of [0, num_items()); any thread, any order, after Prepare.
  int64_t num_items() const { return static_cast<int64_t>(items_.size()); }
  void RunItems(const GroupedMatmulBuffers& b, int64_t begin, int64_t end);
  // Then the groups whose k range was split: partial sums added up into y, [begin, end) of
  // [0, num_finish_items()); any thread, any order, after every RunItems.
  int64_t num_finish_items() const { return static_cast<int64_t>(split_.size()); }
  void FinishItems(const GroupedMatmulBuffers& b, int64_t begin, int64_t end) const;

  int64_t active_groups() const { return static_cast<int64_t>(segments_.size()); }
  // Bytes of weights one call reads.
  int64_t weight_bytes_read() const;

  // Forces an ISA (tests, benchmarks); false when the CPU lacks it.
  bool UseIsa(CpuIsa isa);

 private:
  struct Segment {
    int64_t group, begin, end;  // rows [begin, end) of x and y
    int64_t k_blocks = 1;       // > 1: items sum k ranges into partial sums, FinishItems adds them
    int64_t partial = 0;        // first float of its partial sums ([k_blocks][rows][N])
  };
  struct Item {
    int64_t segment;
    int64_t k0, k1;        // depth range ([E, K, N] layout)
    int64_t r0, r1;        // rows
    int64_t n0, n1;        // output columns
    int64_t partial = -1;  // >= 0: write float32 partial sums there instead of y
  };
  void WriteRows(const GroupedMatmulBuffers& b, const Segment& seg, int64_t r0, int64_t rows, int64_t n0,
                 int64_t width, const float* acc) const;
  void WriteQuantRows(const GroupedMatmulBuffers& b, const Segment& seg, int64_t r0, int64_t rows, int64_t n0,
                      int64_t width, const int32_t* acc) const;
  void BuildQuantItems();
  void RunQuantItem(const GroupedMatmulBuffers& b, const Item& item, std::vector<float>& scratch) const;

  GroupedMatmulParams p_;
  CpuIsa isa_ = CpuIsa::kBaseline;
  int64_t covered_rows_ = 0;       // end of the last group
  std::vector<Segment> segments_;  // groups with rows, ascending
  std::vector<Item> items_;
  std::vector<int64_t> split_;        // segments with k_blocks > 1
  std::vector<float> x32_;            // x widened to float32 (empty for float32 x and int8 x)
  std::unique_ptr<float[]> partial_;  // uninitialised; each item zeroes its own part
};

// The whole op on the calling thread.
void GroupedMatmul(const GroupedMatmulParams& params, const GroupedMatmulBuffers& buffers,
                   const int64_t* ends);

}  // namespace ascend_moe::cpu
