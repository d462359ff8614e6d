#include "ops_src/cann/soc.h"

#include <cctype>
#include <initializer_list>
#include <mutex>
#include <stdexcept>

#include "ops_src/cann/loader.h"
#include "ops_src/cpu/enum_names.h"

namespace ascend_moe::cann {

namespace {

enum class Chip { k910b, k910_93, k950, k310p, kOther };

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The short SoC version of a full name (ops-transformer cmake/scripts/util/opdesc_parser.py
// SOC_TO_SHORT_SOC_MAP: ascend910b1..b4, b2c, b4-1 -> ascend910b; ascend910_93xx -> ascend910_93;
// ascend910_9599 -> ascend910_95; ascend310p1/p3 -> ascend310p; "ascend910b" alone, without a
// digit, is the older ascend910). The 950 is named "Ascend950..." by newer CANN, whose op
// definitions register it as "ascend950" (cann-recipes-infer, ops-nn) where older ones say
// "ascend910_95": one chip.
Chip ShortSoc(const std::string& soc) {
  std::string s = soc;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (StartsWith(s, "ascend910b")) {
    return s.size() > 10 && std::isdigit(static_cast<unsigned char>(s[10])) ? Chip::k910b : Chip::kOther;
  }
  if (StartsWith(s, "ascend910_93")) return Chip::k910_93;
  if (StartsWith(s, "ascend910_95") || StartsWith(s, "ascend950")) return Chip::k950;
  if (StartsWith(s, "ascend310p")) return Chip::k310p;
  return Chip::kOther;
}

constexpr EnumName<Chip> kChipNames[] = {{Chip::k910b, "ascend910b"},
                                         {Chip::k910_93, "ascend910_93"},
                                         {Chip::k950, "ascend910_95 (950)"},
                                         {Chip::k310p, "ascend310p"}};

const char* ChipName(Chip c) { return NameOf(kChipNames, c, "other"); }

struct OperatorChipsRow {
  const char* call;
  std::initializer_list<Chip> chips;
};

// Each operator's AI Core kernel registrations (AddConfig in its op definition):
//   ops-transformer @c29bc10: gmm/grouped_matmul/op_host/grouped_matmul_def.cpp (910b, 910_93,
//     310p: no 950), moe/moe_init_routing_v3, moe_init_routing, moe_finalize_routing_v2,
//     moe_gating_top_k, moe_re_routing (910b, 910_93, 910_95), moe_token_permute (910b, 910_93),
//     moe_token_unpermute (910b, 910_93, 310p), each op_host/<op>_def.cpp;
//   ops-nn @e5c3fa9: activation/swi_glu/op_host/swi_glu_def.cpp (910b, 910_93, 310p, 950);
//   cann-recipes-infer: ops/ascendc/src/moe_gating_top_k_hash/op_host/moe_gating_top_k_hash_def.cpp
//     (910b, 910_93, 950);
//   ops-math @c419332: conversion/transpose/docs/aclnnPermute.md (A2, A3, 950; not the Atlas
//     inference chips, 310p).
const OperatorChipsRow kOperatorChips[] = {
    {"aclnnGroupedMatmulV4", {Chip::k910b, Chip::k910_93, Chip::k310p}},
    {"aclnnMoeInitRoutingV3", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeInitRouting", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeFinalizeRoutingV2", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeGatingTopK", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeGatingTopKHash", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeReRouting", {Chip::k910b, Chip::k910_93, Chip::k950}},
    {"aclnnMoeTokenPermute", {Chip::k910b, Chip::k910_93}},
    {"aclnnMoeTokenUnpermute", {Chip::k910b, Chip::k910_93, Chip::k310p}},
    {"aclnnSwiGlu", {Chip::k910b, Chip::k910_93, Chip::k310p, Chip::k950}},
    {"aclnnPermute", {Chip::k910b, Chip::k910_93, Chip::k950}},
};

const OperatorChipsRow& RowOf(const char* call) {
  for (const OperatorChipsRow& row : kOperatorChips) {
    if (std::string(row.call) == call) return row;
  }
  throw std::logic_error(std::string("no chip table entry for ") + call);
}

}  // namespace

SocReading ReadSoc() {
  static std::mutex mu;
  static SocReading known;  // set once a name was read
  std::lock_guard<std::mutex> lock(mu);
  if (!known.name.empty()) return known;
  SocReading r;
  try {
    const AclRuntime& rt = Runtime();
    r.runtime = true;
    auto read = [&rt] {
      const char* soc = rt.get_soc_name ? rt.get_soc_name() : nullptr;
      return std::string(soc ? soc : "");
    };
    r.name = read();
    if (r.name.empty() && rt.init) {
      // Before aclInit the runtime may not know its SoC (acl_rt_impl_base.cpp InitSocVersion).
      const AclError init = rt.init(nullptr);
      if (init == 0 || init == kAclRepeatInitialize) r.name = read();
      if (init == 0 && rt.finalize) rt.finalize();  // ours to undo: the EP initialises its own
    }
  } catch (const std::runtime_error&) {
    return r;  // no CANN runtime in this process
  }
  if (!r.name.empty()) known = r;
  return r;
}

const std::string& SocName() {
  thread_local std::string name;
  name = ReadSoc().name;
  return name;
}

bool SocIs310P(const std::string& soc) { return ShortSoc(soc.empty() ? ReadSoc().name : soc) == Chip::k310p; }

std::string OperatorChips(const char* call) {
  const OperatorChipsRow& row = RowOf(call);
  std::string text;
  size_t i = 0;
  for (Chip c : row.chips) {
    text += i == 0 ? "" : i + 1 == row.chips.size() ? " and " : ", ";
    text += ChipName(c);
    ++i;
  }
  return text;
}

std::string SocBlockerAll(const std::string& soc) {
  std::string missing;
  for (const OperatorChipsRow& row : kOperatorChips) {
    const std::string why = SocBlocker(soc, row.call);
    if (why.empty()) continue;
    if (soc.empty() && ReadSoc().name.empty())
      return "the SoC is not known (aclrtGetSocName answered nothing after aclInit)";
    missing += (missing.empty() ? "" : ", ") + std::string(row.call);
  }
  if (missing.empty()) return {};
  return "the SoC " + (soc.empty() ? ReadSoc().name : soc) + " has no kernels of " + missing;
}

std::string SocBlocker(const std::string& soc, const char* call) {
  std::string name = soc;
  if (name.empty()) {
    const SocReading r = ReadSoc();
    if (!r.runtime) return {};
    if (r.name.empty()) {
      return std::string("the SoC is not known (aclrtGetSocName answered nothing after aclInit), so ") +
             call + " is not taken to have kernels for it";
    }
    name = r.name;
  }
  const Chip chip = ShortSoc(name);
  for (Chip c : RowOf(call).chips) {
    if (c == chip) return {};
  }
  return "the SoC " + name + " has no kernels of " + call + " (built for " + OperatorChips(call) + " only)";
}

}  // namespace ascend_moe::cann
