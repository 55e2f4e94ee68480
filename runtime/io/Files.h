// Reading files that come from users: only regular files are opened, and
// never in a way that blocks (a FIFO named as an input would wait for a
// writer forever; /dev/zero would never end). docs/security.md lists where
// each input is checked.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/plan/Status.h"

namespace ds::rt {

/// An open descriptor of a regular file (O_NONBLOCK, so opening a FIFO
/// does not wait); anything else is an InvalidArgument error naming it.
absl::StatusOr<int> openRegularFile(const std::string &path);

/// The whole file, refused unless it is a regular file of at most
/// `maxBytes` bytes.
absl::StatusOr<std::string> readRegularFile(const std::string &path, uint64_t maxBytes);

/// An output path is written by replacing it (a temporary file renamed
/// over it): a device or FIFO at that path would be destroyed, so only a
/// missing or regular file is accepted (not a symbolic link, which the
/// rename would replace); `flag` names the option in errors.
absl::Status checkOutputFile(const std::string &path, const std::string &flag);

/// Writes `bytes` to `path` by replacing it: a temporary file created
/// beside it exclusively (mkstemp: never a symlink, FIFO or other file
/// someone left there), written in full, then renamed over `path`; removed
/// again when anything fails.
absl::Status replaceFile(const std::string &path, const void *bytes, size_t size);

/// Whether two paths name one file (same device and inode).
bool sameFile(const std::string &a, const std::string &b);

/// Opens `path` for writing as a stdio stream (appending, or truncated),
/// never blocking: only a regular file, created if missing, or with
/// `streams` a FIFO or terminal already being read (a FIFO nobody reads
/// would make open() wait forever: an error instead). `what` names the
/// flag or config key in errors. With `ownFile` (files ds names itself in
/// a directory it was given: the monitors'), a symbolic link or a file with
/// other hard links there is refused rather than written through.
absl::StatusOr<std::FILE *> openOutputStream(const std::string &path, bool append,
                                             const std::string &what, bool streams = false,
                                             bool ownFile = false);

} // namespace ds::rt
