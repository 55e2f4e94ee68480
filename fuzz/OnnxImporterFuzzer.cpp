// Fuzzes the ONNX importer end to end: protobuf parsing with ds's limits,
// import, the inference pipeline and plan emission. Every input must end
// in a module or in diagnostics, never a crash or a hang.
#include <cstddef>
#include <cstdint>

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "ds/Import/OnnxImporter.h"
#include "ds/Import/TorchParameters.h"
#include "ds/InitAll.h"
#include "ds/Plan/EmitPlan.h"
#include "ds/Pipelines/Pipelines.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (16u << 20)) return 0;
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  in.SetTotalBytesLimit(static_cast<int>(size));
  if (!model.ParseFromCodedStream(&in)) return 0;
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    mlir::ds::registerAllDialects(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  // Training's edits from the exporter's records (TorchParameters.h), on a
  // copy: metadata strings and tables are untrusted too.
  {
    onnx::ModelProto copy = model;
    mlir::ds::ParameterRecoveryOptions recovery;
    recovery.edit = true;
    recovery.modelDir = "/nonexistent-fuzz-dir";
    if (auto r = mlir::ds::recoverParameters(copy, recovery); !r) llvm::consumeError(r.takeError());
  }
  mlir::ds::ImportOptions options;
  // External data resolves beneath a directory that holds nothing.
  auto module = mlir::ds::importOnnxModel(&context, model, "/nonexistent-fuzz-dir/model.onnx", options);
  if (!module) return 0;
  mlir::PassManager pm(&context);
  mlir::ds::buildInferencePipeline(pm, mlir::ds::InferencePipelineOptions());
  if (mlir::failed(pm.run(*module))) return 0;
  ds::rt::PlanWriter writer;
  (void)mlir::ds::emitPlan(*module, mlir::ds::EmitPlanOptions(), writer);
  return 0;
}
