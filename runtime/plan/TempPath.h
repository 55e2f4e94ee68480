//===- TempPath.h - the name an output is written under before its rename -===//
//
// Outputs (plans, .npz arrays, checkpoints' files) are written beside
// their path and renamed over it, so that a crash never leaves half a
// file. The temporary name must itself be a legal name: a 254-byte file
// name plus ".tmp" is not (NAME_MAX is 255), so the stem is shortened.
//
//===----------------------------------------------------------------------===//
#ifndef DS_RUNTIME_PLAN_TEMPPATH_H
#define DS_RUNTIME_PLAN_TEMPPATH_H

#include <string>

namespace ds::rt {

/// `path` + `suffix`, the file name's stem cut so that the last component
/// stays within 255 bytes less 16 (libzip writes its own "NAME.XXXXXX"
/// beside the name it is given), keeping the ".tmp" mark a user recognizes.
inline std::string tempPathFor(const std::string &path, const std::string &suffix = ".tmp") {
  constexpr size_t kNameMax = 255 - 16;
  const size_t slash = path.rfind('/');
  const size_t start = slash == std::string::npos ? 0 : slash + 1;
  std::string dir = path.substr(0, start), name = path.substr(start);
  if (name.size() + suffix.size() > kNameMax) name.resize(kNameMax - suffix.size());
  return dir + name + suffix;
}

} // namespace ds::rt

#endif // DS_RUNTIME_PLAN_TEMPPATH_H
