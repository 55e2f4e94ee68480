//===- OnnxImporter.h - ONNX to the ds dialect ------------------*- C++ -*-===//
#ifndef DS_IMPORT_ONNXIMPORTER_H
#define DS_IMPORT_ONNXIMPORTER_H

#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::ds {

struct ImportOptions {
  /// Static shapes for graph inputs with symbolic or unknown dimensions.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Graph inputs fixed to a value at compile time (.npy files): inputs
  /// that decide shapes (Reshape's shape, Slice's starts, ...) must be.
  llvm::StringMap<std::string> boundInputs;
  /// Results up to this many elements are folded at import when all
  /// operands are constants (shape arithmetic, masks).
  int64_t foldLimit = 65536;
  /// Initializers at least this large become dense_resource blobs.
  int64_t resourceThresholdBytes = 1024;
  /// A dynamic leading (batch) dimension of a graph input takes this size
  /// when --input-shape does not fix it (training: the config's
  /// train_micro_batch_size_per_gpu); 0: none. `batchSource` names it.
  int64_t batchSize = 0;
  std::string batchSource;
  /// Shapes of the arrays the plan will run on (ds-opt --inputs for
  /// inference, --data for training), keyed by input name: dynamic
  /// dimensions take their extents, fixed ones must agree. In training
  /// data the leading dimension counts samples, so dimension 0 comes from
  /// `batchSize` instead. `dataSource` names the file in remarks.
  llvm::StringMap<llvm::SmallVector<int64_t>> dataShapes;
  std::string dataSource;
  bool dataHasSampleDim = false;
  /// The plan trains (ds-opt --config/--loss): training-mode Dropout draws
  /// random masks (a "dropout_key" input fed by ds-run); otherwise it runs
  /// as in model.eval(), with a warning.
  bool training = false;
  /// Graphs with more nodes are refused (ds-opt --max-nodes): a bound on
  /// compile time and memory for files from elsewhere (docs/security.md).
  int64_t maxNodes = 1000000;
  /// Tensors (initializers, inputs, every node's results) with more
  /// elements are refused (ds-opt --max-elements): a shape typo or a hostile
  /// file is an error, not an allocation of terabytes.
  int64_t maxElements = int64_t(1) << 40;
  /// ds-opt --shapes-only: initializers stored as external data are not
  /// read; each is a placeholder of its shape (a splat), so a model whose
  /// weights are elsewhere, or too large to load, can be compiled for
  /// --report (what-if at scale). No plan is emitted from it.
  bool shapesOnly = false;
  /// ds-opt --tie / --untie: initializers kept as one parameter / split per
  /// reader (TorchParameters.h).
  std::vector<std::string> tie, untie;
  /// ds-opt --generate: a causal LM imported over whole sequences of
  /// `generateTokens` tokens, `generateBatch` of them: the first input (the
  /// token ids) is [batch, tokens], an `attention_mask` input is all ones
  /// and a `position_ids` input counts 0, 1, ...; other inputs are refused.
  /// A model that fixes the sequence length fixes `generateTokens` (when
  /// `generateTokensGiven` is false; otherwise the two must agree).
  int64_t generateBatch = 0, generateTokens = 0;
  bool generateTokensGiven = false;
};

/// Parses "name=d0,d1,..." into `options`; false with `error` set otherwise.
bool parseInputShapeSpec(llvm::StringRef spec, ImportOptions &options, std::string &error);
/// Reads the array shapes of an .npz (or a one-input .npy) into
/// `options.dataShapes`; `samples` says the leading dimension counts samples.
bool readDataShapes(const std::string &path, bool samples, ImportOptions &options,
                    std::string &error);
/// Parses "name=file.npy" into `options`.
bool parseBindInputSpec(llvm::StringRef spec, ImportOptions &options, std::string &error);

/// Imports an ONNX model file (binary, ONNX text or protobuf JSON) into a
/// module with one function, `main`. Errors are emitted as diagnostics and
/// name the node, its op, domain and opset; the result is null then.
OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *context, const std::string &path,
                                     const ImportOptions &options);

/// Imports an already parsed model; `path` names it in diagnostics and its
/// directory is where external data is looked up.
OwningOpRef<ModuleOp> importOnnxModel(MLIRContext *context, const onnx::ModelProto &model,
                                      const std::string &path, const ImportOptions &options);

} // namespace mlir::ds

#endif // DS_IMPORT_ONNXIMPORTER_H
