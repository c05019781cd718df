//===- OutputFiles.cpp - the files of one swin-aot run, all or none -------===//

#include "OutputFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace swin_aot;
using llvm::SmallVector;

static llvm::Error outputError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

OutputFiles::~OutputFiles() {
  for (const Pending &file : pending)
    if (!file.temporary.empty())
      llvm::sys::fs::remove(file.temporary);
}

/// Whether `path` names something other than a regular file that exists:
/// a device, a pipe. Those are written in place (renaming over /dev/null
/// would replace the device).
static bool isSpecialFile(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status))
    return false;
  return llvm::sys::fs::exists(status) &&
         status.type() != llvm::sys::fs::file_type::regular_file &&
         status.type() != llvm::sys::fs::file_type::directory_file;
}

llvm::Expected<std::string> OutputFiles::reserve(llvm::StringRef destination) {
  if (destination.empty())
    return outputError("the output path is empty");
  if (destination == "-")
    return outputError("this output cannot be written to standard output");
  if (llvm::sys::fs::is_directory(destination))
    return outputError("cannot write " + destination + ": Is a directory");
  if (isSpecialFile(destination)) {
    llvm::SmallString<256> temporary;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "swin-aot-output", "", temporary))
      return outputError("cannot write " + destination + ": " + ec.message());
    pending.push_back({destination.str(), temporary.str().str(), true});
    return temporary.str().str();
  }
  llvm::SmallString<256> model(destination);
  model += ".tmp-%%%%%%";
  llvm::SmallString<256> temporary;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(model, fd, temporary))
    return outputError("cannot write " + destination + ": " + ec.message());
  llvm::sys::fs::closeFile(fd);
  pending.push_back({destination.str(), temporary.str().str(), false});
  return temporary.str().str();
}

llvm::Error OutputFiles::write(
    llvm::StringRef destination,
    llvm::function_ref<llvm::Error(llvm::raw_pwrite_stream &)> print,
    bool binary) {
  std::string path = "-";
  if (destination != "-") {
    auto reserved = reserve(destination);
    if (!reserved)
      return reserved.takeError();
    path = *reserved;
  } else {
    pending.push_back({"-", "", false});
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(
      path, ec, binary ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Text);
  if (ec)
    return outputError("cannot write " + destination + ": " + ec.message());
  llvm::Error printed = print(os);
  os.close();
  // The stream's error is taken here, or its destructor would make it a
  // fatal error.
  std::error_code written = os.error();
  os.clear_error();
  if (printed)
    return printed;
  if (written)
    return outputError("cannot write " + destination + ": " +
                       written.message());
  return llvm::Error::success();
}

/// Copies the file at `from` into the special file `to`.
static llvm::Error copyInto(llvm::StringRef from, llvm::StringRef to) {
  auto content = llvm::MemoryBuffer::getFile(from, /*IsText=*/false);
  if (!content)
    return outputError("cannot write " + to + ": " +
                       content.getError().message());
  std::error_code ec;
  llvm::raw_fd_ostream os(to, ec, llvm::sys::fs::OF_None);
  if (ec)
    return outputError("cannot write " + to + ": " + ec.message());
  os << (*content)->getBuffer();
  os.close();
  std::error_code written = os.error();
  os.clear_error();
  if (written)
    return outputError("cannot write " + to + ": " + written.message());
  return llvm::Error::success();
}

llvm::Error OutputFiles::commit() {
  // A rename that fails (the destination is a directory, say) takes back
  // the files already moved: none of the set stays behind.
  SmallVector<std::string> moved;
  for (Pending &file : pending) {
    if (file.temporary.empty())
      continue;
    llvm::Error error = llvm::Error::success();
    if (file.special) {
      error = copyInto(file.temporary, file.destination);
      llvm::sys::fs::remove(file.temporary);
    } else if (std::error_code ec =
                   llvm::sys::fs::rename(file.temporary, file.destination)) {
      error =
          outputError("cannot write " + file.destination + ": " + ec.message());
    } else {
      moved.push_back(file.destination);
    }
    file.temporary.clear();
    if (error) {
      for (const std::string &path : moved)
        llvm::sys::fs::remove(path);
      return error;
    }
  }
  pending.clear();
  return llvm::Error::success();
}
