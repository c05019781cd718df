//===- OutputFiles.h - the files of one swin-aot run, all or none -*- C++
//-*-===//
//
// swin-aot writes up to four files (the kernel, its header, its
// description, the GPU runtime). A failure half-way must not leave a mix
// behind: each file is written beside its destination under a temporary
// name, and all are renamed into place only once every one is complete.
// Write errors (a full disk, /dev/full) become one-line errors, never
// LLVM's fatal "IO failure on output stream".
//
//===----------------------------------------------------------------------===//

#ifndef SWIN_AOT_OUTPUTFILES_H
#define SWIN_AOT_OUTPUTFILES_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace swin_aot {

class OutputFiles {
public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  /// Removes every file not committed.
  ~OutputFiles();

  /// A path that `destination`'s content may be written to (by a tool that
  /// takes a path, such as the linker). `-` is refused.
  llvm::Expected<std::string> reserve(llvm::StringRef destination);

  /// Writes `destination` with `print`; `-` is standard output.
  llvm::Error
  write(llvm::StringRef destination,
        llvm::function_ref<llvm::Error(llvm::raw_pwrite_stream &)> print,
        bool binary = false);

  /// Moves every file into place.
  llvm::Error commit();

private:
  struct Pending {
    std::string destination;
    /// Empty: written in place (standard output).
    std::string temporary;
    /// The destination exists and is not a regular file (/dev/null, a
    /// pipe): the temporary, in the system's temporary directory, is
    /// copied into it rather than renamed over it.
    bool special = false;
  };
  llvm::SmallVector<Pending> pending;
};

} // namespace swin_aot

#endif // SWIN_AOT_OUTPUTFILES_H
