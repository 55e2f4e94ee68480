//===- TorchParameters.h - the parameters PyTorch trains, from an export -*- C++ -*-===//
//
// ONNX has no notion of a trainable tensor, and PyTorch 2's exporter,
// optimizing for inference, folds and merges parameters: a transposed
// weight becomes `val_110`, every all-ones LayerNorm scale becomes one
// initializer, a zero Gemm bias disappears, a position-embedding lookup
// becomes a table, and buffers (RoPE's cos/sin, causal masks) become
// tables like any other. What the exporter records lets ds undo that for
// training: the graph signature (which placeholders are parameters,
// buffers and constants, with their module paths) and each node's FX node
// (which placeholders fed it). recoverParameters() edits the model before
// import so that each trained tensor is one initializer named as
// named_parameters() names it, and says what it did. The same edit runs on
// the copy of the model a training plan keeps, so --export-onnx writes the
// trained weights into a graph with the same initializers.
//
//===----------------------------------------------------------------------===//
#ifndef DS_IMPORT_TORCHPARAMETERS_H
#define DS_IMPORT_TORCHPARAMETERS_H

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

namespace mlir::ds {

struct ParameterRecoveryOptions {
  /// Edit the graph (training). Without it only the analysis runs: which
  /// initializers are buffers.
  bool edit = false;
  /// --tie NAME: an initializer the default would untie stays one tensor.
  std::vector<std::string> tie;
  /// --untie NAME: an initializer read by several nodes becomes one
  /// tensor per node, and is never tied to another by value.
  std::vector<std::string> untie;
  /// Where external data is read beneath (a folded table's values).
  std::string modelDir = ".";
  /// --shapes-only: external data is never read (a table's values are
  /// unknown, so nothing is inferred from them).
  bool shapesOnly = false;
};

struct ParameterRecovery {
  /// Float initializers that are not parameters: buffers and constants by
  /// the exporter's signature, tables folded from them, and with ONNX
  /// training_info everything its update bindings do not name.
  llvm::StringSet<> heldConstant;
  /// Of those, an inference BatchNormalization's mean and variance (the
  /// importer marks them ds.running_stat; training says they stay fixed).
  llvm::StringSet<> runningStatistics;
  /// With ONNX training_info: the initializers its update bindings name,
  /// trained whatever their size (a one-element logit scale included; the
  /// importer marks them ds.trained).
  llvm::StringSet<> trained;
  /// Initializers that must not be tied to another by value (untied
  /// copies: equal values, separate parameters).
  llvm::StringSet<> neverTie;
  /// Initializers renamed to the parameter they hold: original -> new.
  std::map<std::string, std::string> renamed;
  /// What was done, one sentence each, for the user.
  std::vector<std::string> notes;
};

/// Reads the exporter's records in `model` and, with `options.edit`,
/// rewrites its graph: merged initializers untied per parameter, folded
/// copies renamed to their parameter, dropped zero biases restored,
/// folded embedding lookups re-expressed over their distinct rows. A
/// --tie/--untie name that is not an initializer is an error.
llvm::Expected<ParameterRecovery> recoverParameters(onnx::ModelProto &model,
                                                    const ParameterRecoveryOptions &options);

/// The padding index of an embedding lookup PyTorch exported as this
/// Gather (its FX node `aten.embedding(weight, indices, padding_idx)`):
/// PyTorch gives that row no gradient, and neither does ds.
std::optional<int64_t> torchPaddingIndex(const onnx::NodeProto &n);

/// Metadata entries of a graph (GraphProto field 16) or node (NodeProto
/// field 9), read from the unknown fields when the ONNX ds is built
/// against predates them.
std::vector<std::pair<std::string, std::string>> graphMetadata(const onnx::GraphProto &g);
std::vector<std::pair<std::string, std::string>> nodeMetadata(const onnx::NodeProto &n);

} // namespace mlir::ds

#endif // DS_IMPORT_TORCHPARAMETERS_H
