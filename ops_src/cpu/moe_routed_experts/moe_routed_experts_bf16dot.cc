// The bfloat16 dot-product paths of MoeRoutedExperts: their names and the dispatch
// (moe_routed_experts_bf16dot.h).
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot.h"

#include <cstdlib>

#include "ops_src/cpu/enum_names.h"
#include "ops_src/cpu/isa.h"

namespace ascend_moe::cpu {

#if ASCEND_MOE_CPU_X86_PATHS
namespace experts_bf16dot_emulated {
Bf16UpRowsFn UpRows;
Bf16DownRowsFn DownRows;
}  // namespace experts_bf16dot_emulated
namespace experts_bf16dot_avx512bf16 {
Bf16UpRowsFn UpRows;
Bf16DownRowsFn DownRows;
}  // namespace experts_bf16dot_avx512bf16
#endif

namespace {

constexpr EnumName<Bf16Dot> kBf16DotNames[] = {
    {Bf16Dot::kWiden, "widen"}, {Bf16Dot::kEmulated, "emulated-bf16"}, {Bf16Dot::kAvx512Bf16, "avx512bf16"}};

bool CpuRunsDot(Bf16Dot dot, CpuIsa isa) {
  switch (dot) {
    case Bf16Dot::kWiden:
      return true;
    case Bf16Dot::kEmulated:
      return kCpuX86Paths && isa != CpuIsa::kBaseline;
    case Bf16Dot::kAvx512Bf16:
      return kCpuX86Paths && isa == CpuIsa::kAvx512 && CpuHasAvx512Bf16();
  }
  return false;
}

}  // namespace

const char* Bf16DotName(Bf16Dot dot) { return NameOf(kBf16DotNames, dot, "?"); }

Bf16Dot ActiveBf16Dot() { return Bf16DotOn(ActiveCpuIsa()); }

Bf16Dot Bf16DotOn(CpuIsa isa) {
  static const int forced = [] {  // -1: no override
    Bf16Dot d = Bf16Dot::kWiden;
    const char* name = std::getenv("ASCEND_MOE_CPU_BF16_DOT");
    return name != nullptr && ParseName(kBf16DotNames, name, &d) ? static_cast<int>(d) : -1;
  }();
  if (forced >= 0 && CpuRunsDot(static_cast<Bf16Dot>(forced), isa)) return static_cast<Bf16Dot>(forced);
  return CpuRunsDot(Bf16Dot::kAvx512Bf16, isa) ? Bf16Dot::kAvx512Bf16 : Bf16Dot::kWiden;
}

Bf16UpRowsFn* Bf16UpRowsOf(Bf16Dot dot) {
#if ASCEND_MOE_CPU_X86_PATHS
  if (dot == Bf16Dot::kAvx512Bf16) return &experts_bf16dot_avx512bf16::UpRows;
  if (dot == Bf16Dot::kEmulated) return &experts_bf16dot_emulated::UpRows;
#endif
  (void)dot;
  return nullptr;
}

Bf16DownRowsFn* Bf16DownRowsOf(Bf16Dot dot) {
#if ASCEND_MOE_CPU_X86_PATHS
  if (dot == Bf16Dot::kAvx512Bf16) return &experts_bf16dot_avx512bf16::DownRows;
  if (dot == Bf16Dot::kEmulated) return &experts_bf16dot_emulated::DownRows;
#endif
  (void)dot;
  return nullptr;
}

}  // namespace ascend_moe::cpu
