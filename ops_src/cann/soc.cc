#include "ops_src/cann/soc.h"

#include <cctype>
#include <stdexcept>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The short SoC versions with MoE kernels, from the full name (ops-transformer
// cmake/scripts/util/opdesc_parser.py SOC_TO_SHORT_SOC_MAP: ascend910b1..b4, b2c, b4-1 ->
// ascend910b; ascend910_93xx -> ascend910_93; ascend910_9599 -> ascend910_95; while
// "ascend910b" alone is the older ascend910). The 950 is also named "Ascend950..." by newer CANN
// (cann-recipes-infer examples test soc_name.startswith("Ascend950")).
bool HasMoeKernels(const std::string& lower) {
  if (StartsWith(lower, "ascend910b")) {
    return lower.size() > 10 && std::isdigit(static_cast<unsigned char>(lower[10]));
  }
  return StartsWith(lower, "ascend910_93") || StartsWith(lower, "ascend910_95") || StartsWith(lower, "ascend950");
}

}  // namespace

const std::string& SocName() {
  static const std::string name = [] {
    try {
      const AclRuntime& rt = Runtime();
      const char* soc = rt.get_soc_name ? rt.get_soc_name() : nullptr;
      return std::string(soc ? soc : "");
    } catch (const std::runtime_error&) {
      return std::string();  // no CANN runtime in this process
    }
  }();
  return name;
}

std::string SocBlocker(const std::string& soc) {
  if (soc.empty()) return {};
  std::string lower = soc;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (HasMoeKernels(lower)) return {};
  return "the SoC " + soc +
         " has no kernels of CANN's MoE operators (they are built for ascend910b, ascend910_93 and "
         "the 950 only)";
}

}  // namespace ascend_moe::cann
