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

#include <cctype>
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

/// The text syntaxes ds parses with recursive parsers, and what their
/// parsers treat as strings and comments (the scan below must agree, or a
/// bracket the parser sees could hide from it):
///  - OnnxText: ONNX 1.12's parser: strings end at the next `"` (no
///    escapes), `#` starts a comment to the end of the line;
///  - Json: llvm::json and protobuf's JSON: strings with `\` escapes, no
///    comments;
///  - Mlir: strings with `\` escapes, `//` comments.
enum class TextSyntax { OnnxText, Json, Mlir };

/// An error message when `text` nests brackets ((, [, {, <) deeper than
/// `limit`, naming the line; "" otherwise. A closer only closes the bracket
/// it matches (so the `>` of `=>` or `->` closes nothing), and strings and
/// comments are skipped exactly as the syntax's parser skips them.
/// OnnxText also refuses a number whose exponent has no digits (`2.5e`),
/// which ONNX's parser would read as 2.5.
inline std::string checkNesting(llvm::StringRef text, int64_t limit = maxTextNesting(),
                                TextSyntax syntax = TextSyntax::Json) {
  std::string open; // the brackets open now, innermost last
  int64_t line = 1;
  auto where = [&] { return " (line " + std::to_string(line) + ")"; };
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      continue;
    }
    if (c == '"') { // a string: to its closing quote
      for (++i; i < text.size(); ++i) {
        if (text[i] == '\n') ++line;
        if (syntax != TextSyntax::OnnxText && text[i] == '\\') {
          if (i + 1 < text.size() && text[i + 1] == '\n') ++line;
          ++i;
          continue;
        }
        if (text[i] == '"') break;
      }
      continue;
    }
    bool comment = (syntax == TextSyntax::OnnxText && c == '#') ||
                   (syntax == TextSyntax::Mlir && c == '/' && i + 1 < text.size() && text[i + 1] == '/');
    if (comment) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (syntax == TextSyntax::OnnxText && std::isdigit(static_cast<unsigned char>(c)) &&
        (i == 0 || !ident(text[i - 1]))) {
      size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < text.size() && (text[k] == '+' || text[k] == '-')) ++k;
        if (k >= text.size() || !std::isdigit(static_cast<unsigned char>(text[k])))
          return "malformed number '" + text.slice(i, k).str() + "'" + where() +
                 ": an exponent needs digits";
      }
      i = j - 1;
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      open.push_back(c);
      if (static_cast<int64_t>(open.size()) > limit)
        return "nested more than " + std::to_string(limit) + " levels deep" + where() +
               "; such a file is refused rather than parsed "
               "(ds-opt --max-nesting raises the limit)";
      continue;
    }
    char want = c == ')' ? '(' : c == ']' ? '[' : c == '}' ? '{' : c == '>' ? '<' : 0;
    if (want && !open.empty() && open.back() == want) open.pop_back();
  }
  return "";
}

} // namespace mlir::ds

#endif // DS_SUPPORT_TEXTLIMITS_H
