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
// AVX-512 / AVX2+FMA+F16C / baseline paths chosen at run time. Knows nothing of ONNX Runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attr_defaults.gen.h"

namespace ascend_moe::cpu {

// Element type of x, weight and y; bias is this type or float32.
enum class GmmType : int { kFloat32, kFloat16, kBFloat16 };
enum class GmmIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

struct GroupedMatmulParams {
  int64_t rows = 0;    // M
  int64_t depth = 0;   // K
  int64_t cols = 0;    // N
  int64_t groups = 0;  // E
  GmmType type = GmmType::kFloat32;
  bool bias_float32 = false;  // bias is float32 (else of `type`); ignored without bias
  bool transpose_weight = attr_defaults::grouped_matmul::kTransposeWeight != 0;  // weight [E, N, K]
};

struct GroupedMatmulBuffers {
  const void* x = nullptr;       // [M, K]
  const void* weight = nullptr;  // [E, K, N], or [E, N, K] with transpose_weight
  const void* bias = nullptr;    // [E, N] or null
  void* y = nullptr;             // [M, N]
};

// The ISA the kernel uses: the best the CPU has, unless ASCEND_MOE_CPU_ISA (baseline / avx2)
// asks for less (the variable the other kernels read too).
GmmIsa GroupedMatmulIsa();
const char* GmmIsaName(GmmIsa isa);

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
  bool UseIsa(GmmIsa isa);

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

  GroupedMatmulParams p_;
  GmmIsa isa_ = GmmIsa::kBaseline;
  int64_t covered_rows_ = 0;       // end of the last group
  std::vector<Segment> segments_;  // groups with rows, ascending
  std::vector<Item> items_;
  std::vector<int64_t> split_;        // segments with k_blocks > 1
  std::vector<float> x32_;            // x widened to float32 (empty for float32 x)
  std::unique_ptr<float[]> partial_;  // uninitialised; each item zeroes its own part
};

// The whole op on the calling thread.
void GroupedMatmul(const GroupedMatmulParams& params, const GroupedMatmulBuffers& buffers,
                   const int64_t* ends);

}  // namespace ascend_moe::cpu
