//===- TextLimits.h - bounds on text inputs before they are parsed --------===//
//
// Recursive-descent parsers (ONNX's text parser, llvm::json, protobuf's
// JSON) recurse once per nesting level: a file nested 100,000 levels deep
// overflows the stack before they can report anything. The nesting is
// measured here first, iteratively, so such a file is an error naming the
// line instead of a crash (docs/security.md).
//
//===----------------------------------------------------------------------===//
#ifndef DS_SUPPORT_TEXTLIMITS_H
#define DS_SUPPORT_TEXTLIMITS_H

#include <cstdint>
#include <string>

#include "llvm/ADT/StringRef.h"

namespace mlir::ds {

/// Deepest nesting a text model or config may have by default: real ONNX
/// text nests a handful of subgraph levels, DeepSpeed configs three or four.
constexpr int64_t kMaxTextNesting = 256;

/// The limit in force (ds-opt --max-nesting sets it; the parsers are deep
/// recursions, so a much larger value may still overflow the stack).
inline int64_t &maxTextNesting() {
  static int64_t limit = kMaxTextNesting;
  return limit;
}

/// Largest ds_config.json read by default: DeepSpeed configs are a few
/// KiB; a huge file is a mistake or an attack on the parser's memory.
constexpr int64_t kMaxConfigBytes = int64_t(16) << 20;

/// The limit in force (ds-opt --max-config-bytes sets it).
inline int64_t &maxConfigBytes() {
  static int64_t limit = kMaxConfigBytes;
  return limit;
}

/// An error message when `text` nests brackets ((, [, {, <) deeper than
/// `limit` (outside double-quoted strings), naming the line; "" otherwise.
inline std::string checkNesting(llvm::StringRef text, int64_t limit = maxTextNesting()) {
  int64_t depth = 0, line = 1;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (inString) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return "nested more than " + std::to_string(limit) + " levels deep (line " +
               std::to_string(line) + "); such a file is refused rather than parsed "
               "(ds-opt --max-nesting raises the limit)";
    } else if (c == ')' || c == ']' || c == '}' || c == '>') {
      if (depth > 0) --depth;
    }
  }
  return "";
}

} // namespace mlir::ds

#endif // DS_SUPPORT_TEXTLIMITS_H
