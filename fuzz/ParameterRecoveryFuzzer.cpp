// Fuzzes what training reads from an exporter's records before import
// (TorchParameters.cpp): graph and node metadata strings, the signature,
// FX node text, folded tables; with every edit enabled. Any binary model
// ends in a recovery or an error naming what is wrong.
#include <cstddef>
#include <cstdint>

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "ds/Import/TorchParameters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (4u << 20)) return 0;
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  in.SetTotalBytesLimit(static_cast<int>(size));
  if (!model.ParseFromCodedStream(&in)) return 0;
  mlir::ds::ParameterRecoveryOptions options;
  options.edit = true;
  options.modelDir = "/nonexistent-fuzz-dir";
  auto r = mlir::ds::recoverParameters(model, options);
  if (!r) llvm::consumeError(r.takeError());
  return 0;
}
