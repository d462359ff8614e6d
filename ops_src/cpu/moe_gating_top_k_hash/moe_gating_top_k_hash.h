// CPU kernel of MoeGatingTopKHash (docs/operators.md §1.2): normalise router logits, add the selection bias,
// restrict to the best expert groups, pick the top-k experts (or look them up in the token-id
// table) and write renormalised, scaled weights. Plain C++ over raw pointers: no ORT, no Python.
// The caller validates shapes and attributes (docs/operators.md §1.3); the kernel itself checks the
// data-dependent rules (token ids and table entries in range) and never reads out of bounds.
#pragma once

#include <cstdint>
#include <string>

#include "ops_src/cpu/attr_defaults.gen.h"
#include "ops_src/cpu/isa.h"

namespace ascend_moe::cpu {

// Element type of x, bias, additional_bias and y.
enum class GatingFloatType : int { kFloat32, kFloat16, kBFloat16 };
// Element type of input_ids and tid2eid.
enum class GatingIntType : int { kInt32, kInt64 };

// Largest k (experts per token) and E (experts) the kernel supports.
inline constexpr int64_t kGatingMaxK = limits::moe_gating_top_k_hash::kMaxK;
inline constexpr int64_t kGatingMaxExperts = limits::moe_gating_top_k_hash::kMaxExperts;

// Sizes and attributes, already validated.
struct MoeGatingTopKHashParams {
  int64_t rows = 0;     // R: tokens
  int64_t experts = 0;  // E
  // Attributes; defaults from the schema (attr_defaults.gen.h). k is required: it has none.
  int64_t k = 0;                                                            // experts per token, 1..64, <= E
  int64_t k_group = attr_defaults::moe_gating_top_k_hash::kKGroup;          // groups kept
  int64_t group_count = attr_defaults::moe_gating_top_k_hash::kGroupCount;  // groups, divides E
  int64_t group_select_mode =
      attr_defaults::moe_gating_top_k_hash::kGroupSelectMode;      // 0 = max, 1 = top-2 sum
  int64_t renorm = attr_defaults::moe_gating_top_k_hash::kRenorm;  // 1 = renormalise softmax weights too
  int64_t norm_type =
      attr_defaults::moe_gating_top_k_hash::kNormType;  // 0 softmax, 1 sigmoid, 2 sqrt(softplus)
  int64_t out_flag = attr_defaults::moe_gating_top_k_hash::kOutFlag;  // 1 = write the scores to `out`
  float routed_scaling_factor = attr_defaults::moe_gating_top_k_hash::kRoutedScalingFactor;
  float eps = attr_defaults::moe_gating_top_k_hash::kEps;
};

// Raw inputs; optional ones are null when absent.
struct MoeGatingTopKHashInputs {
  GatingFloatType x_type = GatingFloatType::kFloat32;
  const void* x = nullptr;     // [R, E], x_type
  const void* bias = nullptr;  // [E], x_type
  // Hash routing: the node has input_ids and tid2eid. Decided by the inputs' presence, never by
  // their pointers: an empty table [0, k] may come with a null data pointer.
  bool hash = false;
  GatingIntType ids_type = GatingIntType::kInt64;
  const void* input_ids = nullptr;  // [R], with tid2eid
  GatingIntType table_type = GatingIntType::kInt32;
  const void* tid2eid = nullptr;                   // [table_rows, k], with input_ids
  int64_t table_rows = 0;                          // n
  const void* additional_bias = nullptr;           // [E], x_type
  const uint8_t* additional_token_mask = nullptr;  // [R] bool bytes; needs additional_bias
};

// Raw outputs.
struct MoeGatingTopKHashOutputs {
  void* y = nullptr;              // [R, k], x_type
  int32_t* expert_idx = nullptr;  // [R, k]
  float* out = nullptr;           // [R, E] when out_flag = 1; may be null otherwise
};

// A data-dependent error found while computing a row.
struct MoeGatingTopKHashError {
  enum Kind { kNone, kTokenIdOutOfRange, kTableEntryOutOfRange };
  Kind kind = kNone;
  int64_t row = -1;      // row of x
  int64_t token_id = 0;  // input_ids[row]
  int64_t column = 0;    // column of tid2eid (kTableEntryOutOfRange)
  int64_t value = 0;     // the offending id or table entry
  bool ok() const { return kind == kNone; }
};

// Computes rows [begin, end). Stops at the first data error (ok() otherwise); rows before it are
// written, the rest of the range is left untouched. A bad token id anywhere in the range is
// returned in preference to a bad table entry, as the NumPy reference reports them; callers
// that split the rows should keep the same preference, then the lowest row.
MoeGatingTopKHashError MoeGatingTopKHashRows(const MoeGatingTopKHashParams& params,
                                             const MoeGatingTopKHashInputs& inputs,
                                             const MoeGatingTopKHashOutputs& outputs, int64_t begin,
                                             int64_t end);

// The row code is built once per instruction-set path (isa.h); MoeGatingTopKHashRows runs the
// path ActiveCpuIsa() names.

// How the AVX-512 build selects the experts: with its own 512-bit code (wide) or with the AVX2
// build's 256-bit code (narrow; faster where the CPU splits 512-bit operations in two, as AMD
// Zen 4 does). kAuto: narrow on AMD CPUs, wide elsewhere, unless the environment variable
// ASCEND_MOE_CPU_SELECT = wide | narrow (read once) says otherwise. Other builds ignore it.
enum class GatingSelect : int { kAuto = 0, kWide = 1, kNarrow = 2 };
// The choice kAuto makes in this process.
GatingSelect MoeGatingTopKHashSelect();

// MoeGatingTopKHashRows with a given build (benchmarks, tests): false, computing nothing, when
// the CPU cannot run it; else the data error (if any) in *error.
bool MoeGatingTopKHashRowsWithIsa(CpuIsa isa, const MoeGatingTopKHashParams& params,
                                  const MoeGatingTopKHashInputs& inputs,
                                  const MoeGatingTopKHashOutputs& outputs, int64_t begin, int64_t end,
                                  MoeGatingTopKHashError* error, GatingSelect select = GatingSelect::kAuto);

// The error as a message in the project's convention ("MoeGatingTopKHash: input '...' ...").
std::string DescribeMoeGatingTopKHashError(const MoeGatingTopKHashError& error,
                                           const MoeGatingTopKHashParams& params, int64_t table_rows);

}  // namespace ascend_moe::cpu
