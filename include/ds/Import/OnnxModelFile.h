//===- OnnxModelFile.h - reading ONNX files safely --------------*- C++ -*-===//
//
// Everything that touches bytes of an untrusted model: the model file's
// size limit, protobuf parsing limits, tensor payloads (raw_data, typed
// fields, external data), per ../shared/RELIABILITY.md rules 1-5.
//
//===----------------------------------------------------------------------===//
#ifndef DS_IMPORT_ONNXMODELFILE_H
#define DS_IMPORT_ONNXMODELFILE_H

#include <cstdint>
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

/// A tensor's payload, little-endian, one byte per bool.
struct TensorPayload {
  int32_t dataType = 0; // onnx::TensorProto_DataType
  llvm::SmallVector<int64_t> shape;
  std::vector<char> bytes;
};

/// Bytes per element of an ONNX data type ds can hold, or 0.
size_t onnxElementBytes(int32_t dataType);
/// "FLOAT", "INT64", ... for messages.
std::string onnxTypeName(int32_t dataType);

/// Decodes `t`, reading external data beneath `modelDir` under the
/// containment rules (no absolute paths, no "..", no symlinks, regular file
/// with one link, offset/length bounds, exact length).
llvm::Expected<TensorPayload> readTensorPayload(const onnx::TensorProto &t,
                                                const std::string &modelDir);

} // namespace mlir::ds

#endif // DS_IMPORT_ONNXMODELFILE_H
