#include "runtime/io/Files.h"
#include "runtime/plan/TempPath.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ds::rt {

absl::StatusOr<int> openRegularFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  // Only a missing file is NotFound: a checkpoint reader treats NotFound
  // as "nothing there", which must never hide an unreadable file.
  if (fd < 0 && errno == ENOENT)
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  if (fd < 0)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  // Reads of a regular file never block; clear the flag anyway.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

absl::StatusOr<std::string> readRegularFile(const std::string &path, uint64_t maxBytes) {
  DS_ASSIGN_OR_RETURN(int fd, openRegularFile(path));
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", maxBytes, " bytes, the most read from such a file"));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != data.size())
    return absl::DataLossError(absl::StrCat("reading ", path, " failed or it shrank"));
  return data;
}

absl::Status checkOutputFile(const std::string &path, const std::string &flag) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus(); // to be created
  // The rename would replace the link itself (/dev/stdout as root, or a
  // link to a file elsewhere, left stale), not write where it points.
  if (S_ISLNK(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path,
        " is a symbolic link; ds replaces output files and would replace the link: name the "
        "file it points to"));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, " exists and is not a regular file; ds writes regular files only"));
  return absl::OkStatus();
}

absl::Status replaceFile(const std::string &path, const void *bytes, size_t size) {
  std::string tmp = tempPathFor(path, ".tmp.XXXXXX");
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create a temporary file beside ", path, ": ", std::strerror(errno)));
  ::fchmod(fd, 0644); // mkstemp's 0600 is not what an output file gets
  const char *p = static_cast<const char *>(bytes);
  size_t done = 0;
  int err = 0;
  while (done < size) {
    ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("writing ", path, " failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

absl::StatusOr<std::FILE *> openOutputStream(const std::string &path, bool append,
                                             const std::string &what, bool streams, bool ownFile) {
  // O_NONBLOCK: opening a FIFO without a reader fails (ENXIO) at once.
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0) |
                      (ownFile ? O_NOFOLLOW : 0),
                  0644);
  if (fd < 0 && ownFile && errno == ELOOP)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", path, " is a symbolic link; ds writes its own files there and never "
        "through a link: remove it"));
  if (fd < 0 && errno == ENXIO)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is a FIFO no process reads; ds would wait for one forever"));
  if (fd < 0)
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 &&
            (S_ISREG(st.st_mode) || (streams && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))));
  if (!ok) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", path, " exists and is not a regular file; ds writes regular files",
        streams ? ", pipes and terminals" : "", " only"));
  }
  if (ownFile && st.st_nlink > 1) { // a hard link: another name's bytes (the data, the plan)
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", path, " has other names (hard links); ds writes its own files there and "
        "never another file's bytes: remove it"));
  }
  if (!append && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
    int err = errno;
    ::close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": cannot truncate ", path, ": ", std::strerror(err)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE *f = ::fdopen(fd, append ? "a" : "w");
  if (!f) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot open ", path));
  }
  return f;
}

} // namespace ds::rt
