// Fuzzes the ONNX text and protobuf-JSON model readers (ds-opt's .onnxtxt
// and .json inputs): the nesting bound, ONNX's own text parser and
// protobuf's JSON parser. Any bytes end in a model or an error, never a
// crash, a stack overflow or a hang. The first byte picks the syntax.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ds/Import/OnnxModelFile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  std::string text(reinterpret_cast<const char *>(data) + 1, size - 1);
  auto model = mlir::ds::parseModelText(text, "fuzz", /*json=*/data[0] & 1);
  if (!model) llvm::consumeError(model.takeError());
  return 0;
}
