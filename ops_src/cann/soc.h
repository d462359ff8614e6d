// Which Ascend chip this process runs on, and whether an ACLNN operator has kernels for it: each
// operator's own kernel registrations (its op definition's AddConfig("<short soc>") lines), read
// from the public operator sources (soc.cc, kOperatorChips, names the file and commit of each).
// libopapi.so exists on hosts whose chip an operator has no kernel for (e.g. Atlas 300I / 310P,
// 910A), where phase 1 would fail with 561003; such calls take their fallback at once instead.
#pragma once

#include <string>

namespace ascend_moe::cann {

// The SoC name aclrtGetSocName reports ("Ascend910B1", "Ascend310P3", ...), read after aclInit
// (SocReading). Empty when no CANN runtime can be loaded or it cannot tell.
const std::string& SocName();

// How the SoC name was read: whether a CANN runtime was loaded at all.
struct SocReading {
  bool runtime = false;  // libascendcl.so was found
  std::string name;      // aclrtGetSocName after aclInit; empty when it answered nothing
};
// Read once per process with a non-empty answer; until then again on each call. When ACL is not
// initialised yet (aclrtGetSocName answers nothing), initialises it with aclInit(nullptr) for the
// read and finalises it again (aclFinalize) when this call was the one that initialised it, so an
// execution provider's own aclInit later succeeds.
SocReading ReadSoc();

// Why `aclnn_call` (e.g. "aclnnGroupedMatmulV4") cannot run on SoC `soc` (a name as
// aclrtGetSocName spells it), or empty when the operator has kernels for it. An empty `soc`
// stands for this process's SoC: without a CANN runtime nothing is said (predictions for an
// Ascend host); with one whose SoC is not known, the call is refused (never assumed native).
std::string SocBlocker(const std::string& soc, const char* aclnn_call);

// Which operators of the table have no kernels for `soc` (this process's when empty): "the SoC
// X has no kernels of aclnnA, aclnnB", or empty when every one has.
std::string SocBlockerAll(const std::string& soc);

// Whether `soc` (this process's when empty) is an Atlas 300I (short SoC version ascend310p), where
// operators registered for it take fewer types.
bool SocIs310P(const std::string& soc);

// The short SoC names (ascend910b, ascend910_93, ascend910_95 for the 950, ascend310p) that
// `aclnn_call` registers kernels for, e.g. "ascend910b, ascend910_93 and ascend310p".
std::string OperatorChips(const char* aclnn_call);

}  // namespace ascend_moe::cann
