//===- OnnxModelFile.h - reading ONNX files safely --------------*- C++ -*-===//
//
// Everything that touches bytes of an untrusted model: the model file's
// size limit, protobuf parsing limits, tensor payloads (raw_data, typed
// fields, external data), as docs/security.md ("Inputs and their checks") lists.
//
//===----------------------------------------------------------------------===//
#ifndef DS_IMPORT_ONNXMODELFILE_H
#define DS_IMPORT_ONNXMODELFILE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace mlir::ds {

/// Largest model file accepted: protobuf's own 2 GiB - 1 limit.
constexpr uint64_t kMaxModelFileBytes = (uint64_t(1) << 31) - 1;
constexpr size_t kMaxTensorRank = 1024;

/// Reads a model: binary protobuf (.onnx), ONNX text syntax (.onnxtxt,
/// .onnxtext) or protobuf JSON (.json).
llvm::Expected<onnx::ModelProto> readModelFile(const std::string &path);
/// Parses ONNX text syntax (or protobuf JSON) held in memory; `name` names
/// it in errors. Nesting is bounded first (TextLimits.h).
llvm::Expected<onnx::ModelProto> parseModelText(const std::string &data, const std::string &name,
                                                bool json);

/// Reads a model leaving out the data of the initializers `drop` names (a
/// training plan's copy of its source model, whose trained weights ds-run
/// writes back): a binary model is filtered one initializer at a time, so
/// the weights are never all in memory.
llvm::Expected<onnx::ModelProto>
readModelWithoutData(const std::string &path, const std::function<bool(const std::string &)> &drop);
/// Clears a tensor's values (raw, typed and external), keeping its name,
/// type and shape.
void stripTensorData(onnx::TensorProto &t);

/// A tensor's payload, little-endian, one byte per bool.
struct TensorPayload {
  int32_t dataType = 0; // onnx::TensorProto_DataType
  llvm::SmallVector<int64_t> shape;
  std::string bytes;
};

/// ONNX data types newer than Debian's onnx schema (1.12) knows by name.
enum : int32_t {
  kOnnxFloat8E4M3FN = 17,
  kOnnxFloat8E4M3FNUZ = 18,
  kOnnxFloat8E5M2 = 19,
  kOnnxFloat8E5M2FNUZ = 20,
  kOnnxUint4 = 21,
  kOnnxInt4 = 22,
  kOnnxFloat4E2M1 = 23,
  kOnnxFloat8E8M0 = 24,
  kOnnxUint2 = 25,
  kOnnxInt2 = 26,
  kOnnxFloat6E2M3 = 27,
  kOnnxFloat6E3M2 = 28,
};

/// Bytes per element of an ONNX data type ds can hold unpacked, or 0.
size_t onnxElementBytes(int32_t dataType);
/// Bits per element of the types ONNX packs (4 or 2), or 0.
int onnxPackedBits(int32_t dataType);
/// "FLOAT", "INT64", ... for messages.
std::string onnxTypeName(int32_t dataType);

/// Decodes `t`, reading external data beneath `modelDir` under the
/// containment rules (no absolute paths, no "..", no symlinks, regular file
/// with one link, offset/length bounds, exact length).
/// Whether `path` is a file this process read as a tensor's external data
/// (an output must not replace it).
bool isExternalDataFile(const std::string &path);

llvm::Expected<TensorPayload> readTensorPayload(const onnx::TensorProto &t,
                                                const std::string &modelDir);
/// The same, but `t`'s raw_data moves into the payload (no copy: the
/// weights of a large model are in memory once); `t` keeps no data.
llvm::Expected<TensorPayload> takeTensorPayload(onnx::TensorProto &t,
                                                const std::string &modelDir);

} // namespace mlir::ds

#endif // DS_IMPORT_ONNXMODELFILE_H
