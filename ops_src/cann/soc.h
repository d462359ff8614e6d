// Which Ascend chip this process runs on, and whether CANN's MoE operators have kernels for it.
// The operator definitions register AI Core kernels for ascend910b, ascend910_93 and the 950
// only (ops-transformer moe/moe_gating_top_k/op_host/moe_gating_top_k_def.cpp and
// moe/moe_re_routing/op_host/moe_re_routing_def.cpp: AddConfig("ascend910b"), ("ascend910_93"),
// ("ascend910_95"); cann-recipes-infer moe_gating_top_k_hash_def.cpp: "ascend950"). libopapi.so
// also exists on Atlas 300I (310P) and 910A hosts, where the operators have no kernel.
#pragma once

#include <string>

namespace ascend_moe::cann {

// The SoC name aclrtGetSocName reports ("Ascend910B1", "Ascend310P3", ...), read once per
// process; empty when no CANN runtime can be loaded or it cannot tell.
const std::string& SocName();

// Why the MoE operators cannot run on SoC `soc` (a name as aclrtGetSocName spells it), or empty
// when they have kernels for it. An empty `soc` (not known) is taken to have them.
std::string SocBlocker(const std::string& soc);

}  // namespace ascend_moe::cann
