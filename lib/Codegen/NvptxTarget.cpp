//===- NvptxTarget.cpp - the NVIDIA chips the compiler targets ------------===//
//
// The chip table behind Rpe/NvptxTarget.h. Checked against LLVM 22
// (`llc-22 -march=nvptx64 -mcpu=help`, and the least `+ptxNN` with which
// llc accepts each chip) and CUDA 13.0's ptxas (`ptxas --help`, and
// assembling that output); test/GPU/chips.mlir compiles a kernel for every
// row and assembles it. The shared memory per block is the CUDA
// programming guide's "maximum amount of shared memory per thread block"
// per compute capability (its technical specifications table): 7.5 64 KB,
// 8.0 and 8.7 163 KB, 8.6 and 8.9 99 KB, 9.0, 10.x and 11.0 227 KB, 12.x
// 99 KB. sm_88, which the table does not list, keeps the 48 KB every chip
// has.
//
//===----------------------------------------------------------------------===//

#include "Rpe/NvptxTarget.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::rpe;

namespace {
struct ChipInfo {
  llvm::StringLiteral name;
  unsigned smVersion;
  /// The least PTX ISA version (times ten) the chip needs: LLVM 22 refuses
  /// lower ones with a fatal error, ptxas with a failure.
  unsigned minPtxVersion;
  /// The shared memory a block may opt in to, in KiB.
  unsigned maxSharedKiB;
};
} // namespace

// Ordered by SM version, each chip before its `a` and `f` variants (the
// list of supported chips in messages is built from this order).
static constexpr ChipInfo kChips[] = {
    {"sm_75", 75, 63, 64},     {"sm_80", 80, 70, 163},
    {"sm_86", 86, 71, 99},     {"sm_87", 87, 74, 163},
    {"sm_88", 88, 90, 48},     {"sm_89", 89, 78, 99},
    {"sm_90", 90, 78, 227},    {"sm_90a", 90, 80, 227},
    {"sm_100", 100, 86, 227},  {"sm_100a", 100, 86, 227},
    {"sm_100f", 100, 88, 227}, {"sm_103", 103, 88, 227},
    {"sm_103a", 103, 88, 227}, {"sm_103f", 103, 88, 227},
    {"sm_110", 110, 90, 227},  {"sm_110a", 110, 90, 227},
    {"sm_110f", 110, 90, 227}, {"sm_120", 120, 87, 99},
    {"sm_120a", 120, 87, 99},  {"sm_120f", 120, 88, 99},
    {"sm_121", 121, 88, 99},   {"sm_121a", 121, 88, 99},
    {"sm_121f", 121, 88, 99},
};

/// The `+ptxNN` features LLVM 22's NVPTX backend knows; it ignores others
/// with a warning and would then pick a PTX version of its own.
static constexpr unsigned kKnownPtxVersions[] = {
    32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73,
    74, 75, 76, 77, 78, 80, 81, 82, 83, 84, 85, 86, 87, 88, 90};

static std::string formatPtxVersion(unsigned version) {
  return (llvm::Twine(version / 10) + "." + llvm::Twine(version % 10)).str();
}

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

int64_t mlir::rpe::getMaxSharedBytesPerBlock(unsigned smVersion) {
  // A chip's variants (sm_90a) share its SM version and its memory.
  const ChipInfo *info = llvm::find_if(kChips, [&](const ChipInfo &known) {
    return known.smVersion == smVersion;
  });
  if (info == std::end(kChips))
    return kStaticSharedBytesPerBlock;
  return int64_t(info->maxSharedKiB) * 1024;
}

std::string mlir::rpe::getSupportedNvptxChips() {
  // One entry per SM version, its variants as suffixes: sm_90[a].
  std::string result;
  llvm::raw_string_ostream os(result);
  for (size_t i = 0, e = std::size(kChips); i < e;) {
    const ChipInfo &base = kChips[i];
    if (i)
      os << ", ";
    os << base.name;
    llvm::SmallVector<llvm::StringRef> suffixes;
    for (++i; i < e && kChips[i].smVersion == base.smVersion; ++i)
      suffixes.push_back(kChips[i].name.drop_front(base.name.size()));
    if (!suffixes.empty())
      os << "[" << llvm::join(suffixes, "|") << "]";
  }
  return result;
}

llvm::Expected<NvptxTarget>
mlir::rpe::parseNvptxTarget(llvm::StringRef chip, llvm::StringRef features) {
  const ChipInfo *info = llvm::find_if(
      kChips, [&](const ChipInfo &known) { return known.name == chip; });
  if (info == std::end(kChips))
    return makeError("unknown NVIDIA chip '" + chip + "' (expected " +
                     getSupportedNvptxChips() + ")");

  NvptxTarget target;
  target.chip = chip.str();
  target.smVersion = info->smVersion;
  target.hasMmaM16N8K16 = hasMmaM16N8K16(info->smVersion);
  target.maxSharedBytesPerBlock = int64_t(info->maxSharedKiB) * 1024;
  target.ptxVersion = info->minPtxVersion;
  if (features.trim().empty()) {
    target.features = "+ptx" + std::to_string(info->minPtxVersion);
    return target;
  }

  // Given features: LLVM turns a PTX version below the chip's into a fatal
  // error and ignores an unknown one; refuse both here, with the features'
  // own spelling. Without a `+ptxNN`, LLVM uses the chip's least version.
  target.features = features.str();
  llvm::SmallVector<llvm::StringRef> items;
  features.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  bool seenPtx = false;
  for (llvm::StringRef item : items) {
    item = item.trim();
    llvm::StringRef digits = item;
    if (!digits.consume_front("+ptx"))
      continue;
    if (seenPtx)
      return makeError("features '" + features +
                       "' name more than one PTX version");
    seenPtx = true;
    unsigned version = 0;
    if (digits.getAsInteger(10, version) ||
        !llvm::is_contained(kKnownPtxVersions, version))
      return makeError("unknown PTX version '" + item + "' in features '" +
                       features + "' (LLVM 22 knows +ptx" +
                       llvm::Twine(kKnownPtxVersions[0]) + " to +ptx" +
                       llvm::Twine(std::end(kKnownPtxVersions)[-1]) + ")");
    if (version < info->minPtxVersion)
      return makeError("features '" + features + "' select PTX " +
                       formatPtxVersion(version) + ", but " + chip +
                       " needs PTX " + formatPtxVersion(info->minPtxVersion) +
                       " or later (+ptx" + llvm::Twine(info->minPtxVersion) +
                       ")");
    target.ptxVersion = version;
  }
  return target;
}
