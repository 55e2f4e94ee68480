// Names that become .npz members: checkpoint state (param:, adam_m:, ...),
// --outputs arrays, --zero-to-fp32 weights. One rule for the writer
// (runtime/io/Npy.cpp), the plan validator (a plan whose state or outputs
// could not be saved is refused when ds-opt writes it, not after training)
// and the ONNX importer (which names the initializer).
#pragma once

#include <cstddef>
#include <string_view>

namespace ds::plan {

/// A zip member name is at most 65535 bytes (a 16-bit length); with the
/// ".npy" suffix and the longest state prefix ("momentum:") room is kept.
constexpr size_t kMaxNpzMemberName = 65000;

/// Why `name` cannot be an .npz member, or null: empty, too long, or a path
/// an extractor could write outside its directory (absolute, a '..'
/// component, a backslash) or that a C string would cut (a NUL byte).
inline const char *npzNameProblem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNpzMemberName) return "is longer than 65000 bytes (a zip member name's limit)";
  if (name.front() == '/') return "starts with '/' (an absolute path)";
  if (name.find('\\') != std::string_view::npos) return "has a backslash";
  if (name.find('\0') != std::string_view::npos) return "has a NUL byte";
  for (size_t start = 0; start <= name.size();) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "..") return "has a '..' path component";
    start = end + 1;
  }
  return nullptr;
}

} // namespace ds::plan
