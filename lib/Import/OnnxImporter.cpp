//===- OnnxImporter.cpp - ONNX to the ds dialect --------------------------===//
//
// One pass over the graph in node order. Every ONNX value maps to an SSA
// value; values computable at compile time (shape arithmetic, masks) are
// folded as soon as their node is imported, by running the runtime's CPU
// kernels (ds/Transforms/Passes.h: foldWithKernels), so inputs that decide
// shapes (Reshape's shape, Slice's starts, ...) are known when needed.
//
// Errors name the node, its op, domain and opset through the node's
// location, and never assert: the model is untrusted input.
//
// This file is the core: the model and opset checks, the graph's inputs,
// initializers and outputs, and the dispatch of each node to its op's
// handler. Handlers live in one file per op family (ElementwiseOps.cpp,
// NNOps.cpp, TensorOps.cpp, ...), built on ImporterCore.h; handlers() below
// collects their tables.
//
//===----------------------------------------------------------------------===//
#include "ds/Import/OnnxImporter.h"

#include "ImporterCore.h"
#include "ds/Import/OnnxModelFile.h"
#include "ds/Import/TorchParameters.h"
#include "runtime/io/Npy.h"
#include "ds/Plan/KernelBridge.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "google/protobuf/unknown_field_set.h"
#include "llvm/ADT/StringSet.h"
#include "onnx/defs/schema.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

// Opsets 6 to 12 differ from 13 only in ways the handlers below cover
// (attributes that became inputs, Softmax's 2-D coercion, opset 6's
// `broadcast`/`axis` attributes and `is_test` flags). Before opset 6 many
// ops had other signatures (Reshape's shape attribute, Concat's default
// axis, string Cast targets); only ops whose meaning has not changed since
// opset 1 are read from such models.
constexpr int64_t kMinOpset = 1;
constexpr int64_t kFullOpset = 6;
bool unchangedSinceOpset1(StringRef op) {
  static const llvm::StringSet<> ops = {
      "Abs", "Ceil", "Elu", "Exp", "Floor", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid",
      "Identity", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Neg", "Not", "Reciprocal", "Relu",
      "Selu", "Sigmoid", "Softmax", "Softplus", "Softsign", "Sqrt", "Tanh", "Transpose"};
  return ops.contains(op);
}
constexpr int64_t kMaxOpset = 28;

/// What a node is checked against: an op version's input and output
/// counts and attribute names.
struct SchemaFacts {
  int minIn, maxIn, minOut, maxOut;
  llvm::StringSet<> attributes;
};

/// The op versions of opsets the linked ONNX library (Debian's 1.12:
/// schemas to opset 17) does not know, generated from a newer ONNX
/// (scripts/gen-onnx-schema-table.py): Reduce ops' axes became an input
/// at 18, Split gained num_outputs, Gelu arrived at 20.
struct NewerSchema {
  const char *op;
  int since, minIn, maxIn, minOut, maxOut;
  const char *attributes; // space-separated
};
constexpr NewerSchema kNewerSchemas[] = {
#include "OnnxNewerSchemas.inc"
};

SchemaFacts factsOf(const NewerSchema &n) {
  SchemaFacts f{n.minIn, n.maxIn, n.minOut, n.maxOut, {}};
  SmallVector<StringRef> names;
  StringRef(n.attributes).split(names, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef a : names) f.attributes.insert(a);
  return f;
}

SchemaFacts factsOf(const onnx::OpSchema &s) {
  SchemaFacts f{s.min_input(), s.max_input(), s.min_output(), s.max_output(), {}};
  for (const auto &[name, attr] : s.attributes()) f.attributes.insert(name);
  return f;
}

/// `op`'s version at `opset`: the newest version the table above has up to
/// `opset`, else the linked library's (up to `knownMax`: an op that has not
/// changed since); nullopt when neither knows the op.
std::optional<SchemaFacts> schemaAt(StringRef op, int64_t opset, int knownMax) {
  if (opset > knownMax) {
    const NewerSchema *best = nullptr;
    for (const NewerSchema &n : kNewerSchemas)
      if (op == n.op && n.since <= opset && (!best || n.since > best->since)) best = &n;
    if (best) return factsOf(*best);
  }
  if (const onnx::OpSchema *s =
          knownMax ? onnx::OpSchemaRegistry::Schema(op.str(), static_cast<int>(std::min<int64_t>(
                                                                  opset, knownMax)),
                                                    "")
                   : nullptr)
    return factsOf(*s);
  return std::nullopt;
}

/// The opset that introduced `op`, from the linked ONNX library's schemas
/// (up to `knownMax`), else from the table of newer versions; 0 when
/// neither knows it.
int64_t firstOpset(StringRef op, int knownMax) {
  const onnx::OpSchema *s =
      knownMax ? onnx::OpSchemaRegistry::Schema(op.str(), knownMax, "") : nullptr;
  while (s && s->since_version() > 1)
    if (const onnx::OpSchema *prev =
            onnx::OpSchemaRegistry::Schema(op.str(), s->since_version() - 1, ""))
      s = prev;
    else
      break;
  if (s) return s->since_version();
  int64_t first = 0;
  for (const NewerSchema &n : kNewerSchemas)
    if (op == n.op && (!first || n.since < first)) first = n.since;
  return first;
}

/// The core: walks the graph and hands each node to its op's handler.
class OnnxImporter : public NodeImporter {
public:
  explicit OnnxImporter(ImportState &state)
      : NodeImporter(state), generateTokens_(opts_.generateTokens), state_(state) {
    state_.importSubgraph = [this](const onnx::GraphProto &g, ArrayRef<Value> inputs) {
      return importSubgraph(g, inputs);
    };
  }

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model);

private:
  // ---- diagnostics ---------------------------------------------------------
  InFlightDiagnostic fileError() { return emitError(FileLineColLoc::get(ctx_, path_, 0, 0)); }

  /// A --bind-input value: the .npy's dtype must be the input's, its shape
  /// must fit the declared one.
  FailureOr<TypedAttr> boundValue(const onnx::ValueInfoProto &vi, const std::string &path,
                                  Location loc) {
    auto arr = ::ds::rt::readNpy(path);
    if (!arr.ok()) {
      emitError(loc) << std::string(arr.status().message());
      return failure();
    }
    FailureOr<Type> elem = elementType(vi.type().tensor_type().elem_type());
    if (failed(elem)) {
      emitError(loc) << "has an unsupported element type";
      return failure();
    }
    auto type = RankedTensorType::get(arr->shape, *elem);
    FailureOr<::ds::plan::DType> dt = planDType(*elem, loc);
    if (failed(dt)) return failure();
    if (!::ds::rt::npyHolds(arr->dtype, *dt)) { // bf16 travels as its uint16 bits
      emitError(loc) << "is " << *elem << " but " << path << " holds "
                     << ::ds::rt::dtypeName(arr->dtype);
      return failure();
    }
    const auto &tt = vi.type().tensor_type();
    if (tt.has_shape()) {
      if (tt.shape().dim_size() != static_cast<int>(arr->shape.size())) {
        emitError(loc) << "has rank " << tt.shape().dim_size() << " but " << path
                       << " has rank " << arr->shape.size();
        return failure();
      }
      for (int i = 0; i < tt.shape().dim_size(); ++i)
        if (tt.shape().dim(i).has_dim_value() && tt.shape().dim(i).dim_value() != arr->shape[i]) {
          emitError(loc) << "dimension " << i << " is " << tt.shape().dim(i).dim_value()
                         << " but " << path << " has " << arr->shape[i];
          return failure();
        }
    }
    std::vector<uint8_t> normalized; // a 4-/2-bit array given as int8 values
    auto bytes = ::ds::rt::npyBytesAs(*arr, *dt, normalized);
    if (!bytes.ok()) {
      emitError(loc) << path << ": " << std::string(bytes.status().message());
      return failure();
    }
    return cast<TypedAttr>(denseFromBytes(type, ArrayRef<uint8_t>(*bytes, arr->data.size())));
  }

  // ---- graph ------------------------------------------------------------------------
  /// main()'s arguments (the graph inputs that are not initializers) and the
  /// inputs --bind-input fixes to constants instead.
  struct GraphInputs {
    SmallVector<Type> argTypes;
    SmallVector<std::string> argNames;
    SmallVector<std::pair<std::string, TypedAttr>> bound;
  };

  LogicalResult importGraph(const onnx::GraphProto &g, func::FuncOp &func);
  LogicalResult checkInputOptions(const onnx::GraphProto &g,
                                  const llvm::StringSet<> &initializerNames);
  LogicalResult addInput(const onnx::ValueInfoProto &vi, GraphInputs &inputs);
  /// --generate's inputs: the token ids, an all-ones attention mask and
  /// counting position ids of whole sequences.
  LogicalResult addGenerationInput(const onnx::ValueInfoProto &vi, GraphInputs &inputs,
                                   Location loc);
  int64_t generateTokens_; // a model's fixed sequence length overrides the default
  bool hasPastInputs_ = false; // --generate on a KV-cache export: its present outputs go
  FailureOr<SmallVector<int64_t>> inputShape(const onnx::ValueInfoProto &vi, Location loc);
  /// Fails naming `loc` when `shape` has more elements than --max-elements
  /// (computed without overflow; negative dimensions are other checks').
  LogicalResult checkElements(ArrayRef<int64_t> shape, Location loc) {
    __int128 n = 1;
    for (int64_t d : shape) {
      if (d < 0) return success();
      n *= d;
      if (n > opts_.maxElements)
        return emitError(loc) << "has more than " << opts_.maxElements
                              << " elements (ds-opt --max-elements raises the limit)";
    }
    return success();
  }
  func::FuncOp createMain(const GraphInputs &inputs);
  LogicalResult importInitializers(const onnx::GraphProto &g);
  LogicalResult importNodes(const onnx::GraphProto &g);
  FailureOr<SmallVector<Value>> importSubgraph(const onnx::GraphProto &g, ArrayRef<Value> inputs);
  LogicalResult importOutputs(const onnx::GraphProto &g, func::FuncOp func);
  LogicalResult define(const std::string &name, Location loc);
  LogicalResult importNode(const onnx::NodeProto &n, int index);
  Location nodeLocation(const onnx::NodeProto &n, int index);

  /// Every family's handlers (registered in their files, one line per op).
  static const HandlerTable &handlers();

  ImportState &state_;
  /// The value names defined so far (inputs, initializers, node outputs).
  llvm::StringSet<> defined_;
};

//===----------------------------------------------------------------------===//
// Model and graph
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> OnnxImporter::run(const onnx::ModelProto &model) {
  // IR versions 1 and 2 predate opset imports (a missing ir_version is 0):
  // such a file is not an ONNX model ds can read the ops of.
  if (model.ir_version() < 3) {
    fileError() << "ir_version " << model.ir_version()
                << " is not supported (ONNX IR 3 and later: the ones that import opsets)";
    return nullptr;
  }
  bool haveDefault = false;
  for (const auto &os : model.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      if (haveDefault && opset_ != os.version()) {
        fileError() << "the model imports the default domain (ai.onnx) twice, at opsets "
                    << opset_ << " and " << os.version();
        return nullptr;
      }
      opset_ = os.version();
      haveDefault = true;
    }
  }
  if (!haveDefault) {
    fileError() << "the model imports no opset of the default domain (ai.onnx)";
    return nullptr;
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    fileError() << "opset " << opset_ << " of domain ai.onnx is not supported (ds reads opsets "
                << kMinOpset << " to " << kMaxOpset << "); convert the model with "
                << "onnx.version_converter";
    return nullptr;
  }
  if (!model.has_graph()) {
    fileError() << "the model has no graph";
    return nullptr;
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(FileLineColLoc::get(ctx_, path_, 0, 0));
  (*module)->setAttr("ds.source", b_.getStringAttr(llvm::sys::path::filename(path_)));
  (*module)->setAttr("ds.opset", b_.getI64IntegerAttr(opset_));
  // Every initializer's name, read or not: --parameters and --freeze may
  // name one no node reads (as named_parameters() lists an unused one).
  SmallVector<Attribute> initializers;
  for (const auto &t : model.graph().initializer()) initializers.push_back(b_.getStringAttr(t.name()));
  (*module)->setAttr("ds.initializer_names", b_.getArrayAttr(initializers));
  b_.setInsertionPointToEnd(module->getBody());
  func::FuncOp func;
  if (failed(importGraph(model.graph(), func)))
    return nullptr;
  if (failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

Location OnnxImporter::nodeLocation(const onnx::NodeProto &n, int index) {
  std::string name = n.name().empty() ? (n.op_type() + "_" + std::to_string(index)) : n.name();
  std::string domain = n.domain().empty() ? "ai.onnx" : n.domain();
  return NameLoc::get(b_.getStringAttr(llvm::formatv("node '{0}' ({1}, domain {2}, opset {3})",
                                                     name, n.op_type(), domain, opset_)
                                           .str()));
}

// Phases in the graph's order: inputs become main()'s arguments (or bound
// constants), then initializers, nodes and the outputs main() returns.
LogicalResult OnnxImporter::importGraph(const onnx::GraphProto &g, func::FuncOp &func) {
  // Graph inputs that are not initializers become function arguments.
  llvm::StringSet<> initializerNames;
  for (const auto &t : g.initializer()) initializerNames.insert(t.name());
  if (g.sparse_initializer_size() > 0)
    return fileError() << "sparse initializers are not supported";
  if (failed(checkInputOptions(g, initializerNames))) return failure();

  GraphInputs inputs;
  std::vector<std::string> defaulted;
  for (const auto &vi : g.input()) {
    if (initializerNames.contains(vi.name())) {
      defaulted.push_back(vi.name());
      continue;
    }
    if (failed(addInput(vi, inputs))) return failure();
  }
  // ONNX makes such an initializer an input's default, which a caller may
  // override; ds compiles the value in (as onnxruntime does unless asked),
  // and says so once rather than leave a later "unknown input" unexplained.
  if (defaulted.size() == 1)
    emitRemark(FileLineColLoc::get(ctx_, path_, 0, 0))
        << "graph input '" << defaulted.front()
        << "' has an initializer: compiled in as a constant (ONNX's overridable default is "
           "fixed in the plan)";
  else if (defaulted.size() > 1)
    emitRemark(FileLineColLoc::get(ctx_, path_, 0, 0))
        << defaulted.size() << " graph inputs have initializers ('" << defaulted.front()
        << "', ...): compiled in as constants (ONNX's overridable defaults are fixed in the "
           "plan)";
  func = createMain(inputs);
  if (failed(importInitializers(g)) || failed(importNodes(g))) return failure();
  return importOutputs(g, func);
}

// Names are unique in a valid graph; a duplicate would silently rebind one.
LogicalResult OnnxImporter::define(const std::string &name, Location loc) {
  if (name.empty()) return success();
  // A NUL would cut the name wherever it is used as a C string (an .npz
  // member, a message): refused, and shown escaped.
  if (name.find('\0') != std::string::npos) {
    std::string shown;
    for (unsigned char ch : name)
      shown += ch < 0x20 || ch == 0x7f ? llvm::formatv("\\x{0:x-2}", unsigned(ch)).str()
                                       : std::string(1, static_cast<char>(ch));
    return emitError(NameLoc::get(b_.getStringAttr("value '" + shown + "'")))
           << "its name contains a NUL byte";
  }
  if (!defined_.insert(name).second)
    return emitError(loc) << "value '" << name << "' is defined more than once";
  return success();
}

// A mistyped --bind-input or --input-shape name would otherwise be ignored.
LogicalResult OnnxImporter::checkInputOptions(const onnx::GraphProto &g,
                                              const llvm::StringSet<> &initializerNames) {
  llvm::StringSet<> inputNames, defaulted;
  for (const auto &vi : g.input())
    (initializerNames.contains(vi.name()) ? defaulted : inputNames).insert(vi.name());
  // A graph input that also has an initializer is an input with a default
  // value; ds compiles the default in, so it takes no value at run time.
  auto notInput = [&](StringRef name) {
    return defaulted.contains(name)
               ? std::string("', which the graph lists as an input but also gives an "
                             "initializer (a default value): ds compiles the initializer in as "
                             "a parameter; remove the initializer to make it a run-time input")
               : std::string("', which is not an input of the graph");
  };
  for (const auto &kv : opts_.boundInputs)
    if (!inputNames.contains(kv.getKey()))
      return fileError() << "--bind-input names '" << kv.getKey() << notInput(kv.getKey());
  for (const auto &kv : opts_.inputShapes) {
    if (!inputNames.contains(kv.getKey()))
      return fileError() << "--input-shape names '" << kv.getKey() << notInput(kv.getKey());
    // A bound input takes its shape from its file: the other would be ignored.
    if (opts_.boundInputs.count(kv.getKey()))
      return fileError() << "--input-shape and --bind-input both name '" << kv.getKey()
                         << "'; a bound input's shape is its file's";
  }
  if (opts_.dataShapes.contains("") && inputNames.size() != 1)
    return fileError() << opts_.dataSource << " is one array but the graph has "
                       << inputNames.size() << " inputs; use an .npz keyed by input name";
  // --inputs holds what the plan will run on: an array no input reads is
  // a mistake (a misspelled name), as it is for ds-run. (Training data
  // also holds labels, which are no graph input.)
  if (!opts_.dataHasSampleDim)
    for (const auto &kv : opts_.dataShapes)
      if (!kv.getKey().empty() && !inputNames.contains(kv.getKey()))
        return fileError() << opts_.dataSource << " has an array '" << kv.getKey()
                           << notInput(kv.getKey());
  return success();
}

// An input is either bound to a --bind-input value (a constant, so shapes it
// decides are known) or an argument of a static type.
LogicalResult OnnxImporter::addInput(const onnx::ValueInfoProto &vi, GraphInputs &inputs) {
  Location loc = NameLoc::get(b_.getStringAttr("graph input '" + vi.name() + "'"));
  if (vi.name().empty()) return emitError(loc) << "has no name";
  if (opts_.generateTokens > 0 && !opts_.boundInputs.count(vi.name()))
    return addGenerationInput(vi, inputs, loc);
  if (auto it = opts_.boundInputs.find(vi.name()); it != opts_.boundInputs.end()) {
    FailureOr<TypedAttr> value = boundValue(vi, it->second, loc);
    if (failed(value)) return failure();
    inputs.bound.push_back({vi.name(), *value});
    return define(vi.name(), loc);
  }
  if (vi.type().has_optional_type() && vi.type().optional_type().elem_type().has_tensor_type()) {
    // An optional tensor input is a tensor the caller gives: a plan's
    // inputs are all present (OptionalHasElement of it is true).
    onnx::ValueInfoProto t = vi;
    *t.mutable_type() = vi.type().optional_type().elem_type();
    return addInput(t, inputs);
  }
  if (!vi.type().has_tensor_type())
    return emitError(loc) << "is not a tensor";
  const auto &tt = vi.type().tensor_type();
  FailureOr<Type> elem = elementType(tt.elem_type());
  if (failed(elem))
    return emitError(loc) << "has unsupported element type " << onnxTypeName(tt.elem_type());
  FailureOr<SmallVector<int64_t>> shape = inputShape(vi, loc);
  if (failed(shape)) return failure();
  if (shape->size() > kMaxTensorRank)
    return emitError(loc) << "has rank over 1024";
  if (failed(checkElements(*shape, loc))) return failure();
  inputs.argTypes.push_back(RankedTensorType::get(*shape, *elem));
  inputs.argNames.push_back(vi.name());
  return define(vi.name(), loc);
}

/// Hugging Face's and Optimum's names of a KV-cache export's inputs and
/// outputs: past_key_values.N.key, past.N.value, present.N.key, ...
static bool isPastInput(llvm::StringRef name) {
  return name.starts_with("past_key_values") || name.starts_with("past.") ||
         name.starts_with("past_key") || name.starts_with("past_value");
}
static bool isPresentOutput(llvm::StringRef name) { return name.starts_with("present"); }

LogicalResult OnnxImporter::addGenerationInput(const onnx::ValueInfoProto &vi,
                                               GraphInputs &inputs, Location loc) {
  if (!vi.type().has_tensor_type()) return emitError(loc) << "is not a tensor";
  const auto &tt = vi.type().tensor_type();
  FailureOr<Type> elem = elementType(tt.elem_type());
  auto it = dyn_cast_or_null<IntegerType>(succeeded(elem) ? *elem : Type());
  const bool ids = inputs.argTypes.empty() && vi.name() != "attention_mask" &&
                   vi.name() != "position_ids";
  // An export with a KV cache (past_key_values.N.key/value [batch, heads,
  // past, head_dim]): ds keeps its own cache, so the model runs with no
  // past (the past axis empty, its concatenations left out) and its
  // present outputs are dropped (importOutputs).
  if (!ids && isPastInput(vi.name())) {
    if (failed(elem) || !isa<FloatType>(*elem) || !tt.has_shape())
      return emitError(loc) << "--generate: a past key/value input must be a float tensor of "
                               "known rank";
    SmallVector<int64_t> shape;
    int past = -1;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      if (dim.has_dim_value()) shape.push_back(dim.dim_value());
      else if (d == 0) shape.push_back(opts_.generateBatch);
      else if (past < 0) past = d, shape.push_back(0);
      else
        return emitError(loc) << "--generate: a past key/value input with two dynamic "
                                 "dimensions besides the batch (dimensions "
                              << past << " and " << d << "); ds can only leave out the past "
                                                         "length";
    }
    if (past < 0)
      return emitError(loc) << "--generate: a past key/value input whose past length is fixed; "
                               "export it with a dynamic past dimension";
    auto type = RankedTensorType::get(shape, *elem);
    inputs.bound.push_back({vi.name(), DenseElementsAttr::get(type, ArrayRef<Attribute>{})});
    hasPastInputs_ = true;
    return define(vi.name(), loc);
  }
  if (!ids && vi.name() != "attention_mask" && vi.name() != "position_ids")
    return emitError(loc) << "--generate: a causal LM takes token ids (and optionally "
                             "attention_mask and position_ids); fix this input with "
                             "--bind-input "
                          << vi.name() << "=FILE.npy";
  if (!it || it.getWidth() == 1 || (tt.has_shape() && tt.shape().dim_size() != 2))
    return emitError(loc) << "--generate: " << (ids ? "token ids" : vi.name())
                          << " must be integers [batch, sequence]";
  int64_t &tokens = generateTokens_;
  const int64_t batch = opts_.generateBatch;
  for (int i = 0; i < 2 && tt.has_shape(); ++i) {
    const auto &d = tt.shape().dim(i);
    if (!d.has_dim_value()) continue;
    if (i == 0 && d.dim_value() != batch)
      return emitError(loc) << "--generate: the model fixes the batch at " << d.dim_value()
                            << "; --batch " << batch << " differs";
    if (i == 1 && d.dim_value() != tokens) {
      if (opts_.generateTokensGiven)
        return emitError(loc) << "--generate: the model was exported for sequences of exactly "
                              << d.dim_value() << " tokens; --max-tokens " << tokens
                              << " differs (export with a dynamic sequence dimension to "
                                 "generate longer ones)";
      tokens = d.dim_value();
    }
  }
  if (failed(checkElements({batch, tokens}, loc))) return failure();
  auto type = RankedTensorType::get({batch, tokens}, it);
  if (ids) {
    inputs.argTypes.push_back(type);
    inputs.argNames.push_back(vi.name());
    return define(vi.name(), loc);
  }
  SmallVector<APInt> values;
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t t = 0; t < tokens; ++t)
      values.push_back(APInt(it.getWidth(), vi.name() == "attention_mask" ? 1 : t));
  inputs.bound.push_back({vi.name(), DenseElementsAttr::get(type, values)});
  return define(vi.name(), loc);
}

// Plans have static shapes: --input-shape gives one (it must agree with the
// model's fixed dimensions), else the model must fix every dimension.
FailureOr<SmallVector<int64_t>> OnnxImporter::inputShape(const onnx::ValueInfoProto &vi,
                                                         Location loc) {
  const auto &tt = vi.type().tensor_type();
  SmallVector<int64_t> shape;
  auto spec = opts_.inputShapes.find(vi.name());
  if (spec != opts_.inputShapes.end()) {
    shape = spec->second;
    if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(shape.size()))
      return emitError(loc) << "has rank " << tt.shape().dim_size()
                            << " but --input-shape gives " << shape.size() << " dimensions";
    if (tt.has_shape())
      for (int i = 0; i < tt.shape().dim_size(); ++i)
        if (tt.shape().dim(i).has_dim_value() && tt.shape().dim(i).dim_value() != shape[i])
          return emitError(loc) << "dimension " << i << " is fixed at "
                                << tt.shape().dim(i).dim_value()
                                << " by the model but --input-shape gives " << shape[i];
    return shape;
  }
  auto data = opts_.dataShapes.find(vi.name());
  if (data == opts_.dataShapes.end()) data = opts_.dataShapes.find(""); // a one-input .npy
  const SmallVector<int64_t> *given = data == opts_.dataShapes.end() ? nullptr : &data->second;
  if (!tt.has_shape() && !given)
    return emitError(loc) << "has no shape; give one with --input-shape " << vi.name()
                          << "=d0,d1,...";
  int rank = tt.has_shape() ? tt.shape().dim_size() : static_cast<int>(given->size());
  if (given && static_cast<int>(given->size()) != rank)
    return emitError(loc) << "has rank " << rank << " but " << opts_.dataSource << "['"
                          << vi.name() << "'] has " << given->size() << " dimensions";
  for (int i = 0; i < rank; ++i) {
    if (tt.has_shape() && tt.shape().dim(i).has_dim_value() && tt.shape().dim(i).dim_value() < 0)
      return emitError(loc) << "dimension " << i << " is " << tt.shape().dim(i).dim_value()
                            << ": a dimension is a size >= 0 or a symbol";
    bool known = tt.has_shape() && tt.shape().dim(i).has_dim_value() &&
                 tt.shape().dim(i).dim_value() >= 0;
    std::string param = tt.has_shape() && tt.shape().dim(i).has_dim_param()
                            ? " ('" + tt.shape().dim(i).dim_param() + "')"
                            : "";
    // Training data counts samples in dimension 0: the batch is the config's.
    bool fromData = given && !(i == 0 && opts_.dataHasSampleDim);
    if (known) {
      int64_t fixed = tt.shape().dim(i).dim_value();
      if (fromData && (*given)[i] != fixed)
        return emitError(loc) << "dimension " << i << " is fixed at " << fixed
                              << " by the model but " << opts_.dataSource << "['" << vi.name()
                              << "'] has " << (*given)[i];
      shape.push_back(fixed);
      continue;
    }
    // Say which dimension was fixed to what: a wrong guess shows here.
    if (i == 0 && opts_.batchSize > 0) {
      emitRemark(loc) << "dimension 0" << param << " is dynamic; fixed to " << opts_.batchSize
                      << " by " << opts_.batchSource;
      shape.push_back(opts_.batchSize);
      continue;
    }
    if (fromData) {
      emitRemark(loc) << "dimension " << i << param << " is dynamic; fixed to " << (*given)[i]
                      << " by " << opts_.dataSource;
      shape.push_back((*given)[i]);
      continue;
    }
    return emitError(loc) << "dimension " << i << param
                          << " is dynamic; fix it at compile time with --input-shape "
                          << vi.name() << "=d0,d1,..."
                          << (i == 0 ? " (training: train_micro_batch_size_per_gpu in --config;"
                                       " inference: --inputs FILE.npz)"
                                     : " or from the arrays with --inputs/--data FILE.npz");
  }
  return shape;
}

// main() exists before the body is imported; its results are set once the
// outputs are known. Bound inputs are constants at the top of the body.
func::FuncOp OnnxImporter::createMain(const GraphInputs &inputs) {
  auto mainFunc = func::FuncOp::create(b_, FileLineColLoc::get(ctx_, path_, 0, 0), "main",
                                       b_.getFunctionType(inputs.argTypes, {}));
  Block *body = mainFunc.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(inputs.argNames)) {
    mainFunc.setArgAttr(i, "ds.name", b_.getStringAttr(name));
    values_[name] = body->getArgument(i);
  }
  b_.setInsertionPointToEnd(body);
  for (auto &[name, value] : inputs.bound)
    values_[name] = ConstantOp::create(
                        b_, NameLoc::get(b_.getStringAttr("bound input '" + name + "'")), value)
                        .getResult();
  return mainFunc;
}

// Initializers: float tensors are parameters (weights); the rest are
// constants (index tables, shapes) that folding may use. A float
// initializer that is not a parameter by the exporter's records
// (TorchParameters.h) is a ds.parameter with `ds.buffer`, which training
// does not update; an untied copy is `ds.untied`, never tied by value.
LogicalResult OnnxImporter::importInitializers(const onnx::GraphProto &g) {
  static const ParameterRecovery none;
  const ParameterRecovery &recovered = state_.recovery ? *state_.recovery : none;
  for (const auto &t : g.initializer()) {
    Location loc = NameLoc::get(b_.getStringAttr("initializer '" + t.name() + "'"));
    if (t.name().empty()) return emitError(loc) << "has no name";
    // Initializers become state named in checkpoints (.npz members): a
    // '..' component would be a path out of an extractor's directory, and
    // ds-run would refuse to save it, so it is refused here.
    SmallVector<StringRef> components;
    StringRef(t.name()).split(components, '/');
    if (llvm::is_contained(components, ".."))
      return emitError(loc) << "has a '..' path component in its name, which a checkpoint "
                               "cannot hold";
    if (failed(define(t.name(), loc))) return failure();
    loc_ = loc;
    if (failed(checkElements(SmallVector<int64_t>(t.dims().begin(), t.dims().end()), loc)))
      return failure();
    FailureOr<TypedAttr> value = tensorAttr(t, loc);
    if (failed(value)) return failure();
    Type elem = cast<ShapedType>(value->getType()).getElementType();
    if (isa<FloatType>(elem)) {
      auto param = ParameterOp::create(b_, loc, t.name(), *value);
      if (recovered.heldConstant.contains(t.name())) param->setAttr("ds.buffer", b_.getUnitAttr());
      if (recovered.runningStatistics.contains(t.name()))
        param->setAttr("ds.running_stat", b_.getUnitAttr());
      if (recovered.neverTie.contains(t.name())) param->setAttr("ds.untied", b_.getUnitAttr());
      if (recovered.trained.contains(t.name())) param->setAttr("ds.trained", b_.getUnitAttr());
      values_[t.name()] = param.getResult();
    } else
      values_[t.name()] = ConstantOp::create(b_, loc, *value).getResult();
  }
  return success();
}

// One pass in node order: a node may only use values defined before it.
LogicalResult OnnxImporter::importNodes(const onnx::GraphProto &g) {
  if (g.node_size() > opts_.maxNodes)
    return emitError(NameLoc::get(b_.getStringAttr("graph '" + g.name() + "'")))
           << "has " << g.node_size() << " nodes, over the limit of " << opts_.maxNodes
           << " (raise it with ds-opt --max-nodes)";
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &n = g.node(i);
    loc_ = nodeLocation(n, i);
    for (const auto &in : n.input())
      if (!in.empty() && !values_.count(in) && !state_.sequences.count(in) &&
          !state_.optionals.count(in))
        return emitError(loc_) << "input '" << in << "' is not defined before the node "
                               << "(undefined, or the graph is not topologically sorted / "
                               << "has a cycle)";
    for (const auto &out : n.output())
      if (failed(define(out, loc_))) return failure();
    if (failed(importNode(n, i))) return failure();
  }
  return success();
}

// A subgraph sees the enclosing scope's values; what it defines (its
// inputs, initializers and node outputs) is dropped after it, so an
// unrolled body can define its names again at every iteration. The
// current node's read-inputs record and location are kept for it.
FailureOr<SmallVector<Value>> OnnxImporter::importSubgraph(const onnx::GraphProto &g,
                                                           ArrayRef<Value> inputs) {
  Location outer = loc_;
  if (g.input_size() != static_cast<int>(inputs.size()))
    return FailureOr<SmallVector<Value>>(emitError(outer) << "subgraph '" << g.name() << "' takes "
                                                          << g.input_size() << " inputs, given "
                                                          << inputs.size());
  if (g.sparse_initializer_size() > 0)
    return FailureOr<SmallVector<Value>>(emitError(outer) << "subgraph '" << g.name()
                                                          << "' has sparse initializers");
  llvm::StringMap<Value> savedValues = values_;
  llvm::StringMap<SmallVector<Value>> savedSequences = sequences_;
  llvm::StringMap<Value> savedOptionals = state_.optionals;
  llvm::StringSet<> savedDefined = defined_;
  std::vector<bool> savedRead = state_.inputsRead;
  auto restore = [&] {
    values_ = std::move(savedValues);
    sequences_ = std::move(savedSequences);
    state_.optionals = std::move(savedOptionals);
    defined_ = std::move(savedDefined);
    state_.inputsRead = std::move(savedRead);
    loc_ = outer;
  };
  for (int i = 0; i < g.input_size(); ++i) {
    values_[g.input(i).name()] = inputs[i];
    defined_.insert(g.input(i).name());
  }
  for (const auto &t : g.initializer()) { // constants of the body, never trained
    loc_ = NameLoc::get(b_.getStringAttr("initializer '" + t.name() + "' of subgraph '" +
                                         g.name() + "'"));
    FailureOr<TypedAttr> value = tensorAttr(t, loc_);
    if (failed(value)) {
      restore();
      return failure();
    }
    values_[t.name()] = ConstantOp::create(b_, loc_, *value).getResult();
    defined_.insert(t.name());
  }
  if (failed(importNodes(g))) {
    restore();
    return failure();
  }
  SmallVector<Value> outs;
  for (const auto &vi : g.output()) {
    auto it = values_.find(vi.name());
    if (it == values_.end()) {
      restore();
      return FailureOr<SmallVector<Value>>(
          emitError(outer) << "output '" << vi.name() << "' of subgraph '" << g.name()
                           << "' is " << (sequences_.count(vi.name()) ? "a sequence" : "not produced")
                           << " (ds takes tensor outputs from subgraphs)");
    }
    outs.push_back(it->second);
  }
  restore();
  return outs;
}

// main() returns the graph outputs under their names; a declared element
// type that differs from the computed one means the import went wrong.
LogicalResult OnnxImporter::importOutputs(const onnx::GraphProto &g, func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  if (g.output_size() == 0)
    return fileError() << "graph '" << g.name() << "' has no outputs: there is nothing to compute";
  SmallVector<std::string> names;
  for (const auto &vi : g.output()) {
    // With --generate, a KV-cache export's present keys and values (ds
    // derives its own cache).
    if (hasPastInputs_ && isPresentOutput(vi.name())) continue;
    names.push_back(vi.name());
    auto it = values_.find(vi.name());
    Location loc = NameLoc::get(b_.getStringAttr("graph output '" + vi.name() + "'"));
    if (it == values_.end() && state_.sequences.count(vi.name()))
      return emitError(loc) << "is a sequence; ds plans return tensors (concatenate it with "
                               "ConcatFromSequence, or return its elements)";
    if (it == values_.end())
      return emitError(loc) << "is not produced by any node";
    Value v = it->second;
    if (vi.type().has_tensor_type()) {
      FailureOr<Type> elem = elementType(vi.type().tensor_type().elem_type());
      if (succeeded(elem) && *elem != typeOf(v).getElementType())
        return emitError(loc) << "is declared " << *elem << " but computes "
                              << typeOf(v).getElementType();
      // So is a declared extent (a number, not a symbol) the result does
      // not have: the graph does not compute what it says it does.
      const auto &tt = vi.type().tensor_type();
      auto computed = typeOf(v).getShape();
      if (tt.has_shape()) {
        bool mismatch = tt.shape().dim_size() != static_cast<int>(computed.size());
        for (int d = 0; !mismatch && d < tt.shape().dim_size(); ++d)
          mismatch = tt.shape().dim(d).has_dim_value() &&
                     !ShapedType::isDynamic(computed[d]) &&
                     tt.shape().dim(d).dim_value() != computed[d];
        if (mismatch) {
          std::string declared;
          for (int d = 0; d < tt.shape().dim_size(); ++d)
            declared += (d ? "x" : "") + (tt.shape().dim(d).has_dim_value()
                                              ? std::to_string(tt.shape().dim(d).dim_value())
                                              : std::string("?"));
          return emitError(loc) << "is declared with shape [" << declared << "] but computes "
                                << typeOf(v);
        }
      }
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  func::ReturnOp::create(b_, func.getLoc(), results);
  // The arguments as they are now: Dropout may have added its key.
  func.setFunctionType(b_.getFunctionType(func.getArgumentTypes(), resultTypes));
  for (auto [i, name] : llvm::enumerate(names))
    func.setResultAttr(i, "ds.name", b_.getStringAttr(name));
  return success();
}

LogicalResult OnnxImporter::importNode(const onnx::NodeProto &n, int index) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return emitError(loc_) << "domain '" << n.domain() << "' is not supported";
  for (const auto &a : n.attribute())
    if ((a.type() == onnx::AttributeProto_AttributeType_GRAPH ||
         a.type() == onnx::AttributeProto_AttributeType_GRAPHS) &&
        n.op_type() != "If" && n.op_type() != "Loop" && n.op_type() != "Scan")
      return emitError(loc_) << "subgraph attributes are read on If, Loop and Scan only";
  // A reference to an attribute of an enclosing function (ONNX allows it
  // only in function bodies, which are inlined before this) has no value
  // here: read as empty it would be 0 (LeakyRelu's alpha).
  for (const auto &a : n.attribute())
    if (!a.ref_attr_name().empty())
      return emitError(loc_) << "attribute '" << a.name() << "' refers to function attribute '"
                             << a.ref_attr_name()
                             << "', which only a function body's node may do";
  // A second value of one attribute would be ignored (ONNX's checker:
  // "appeared multiple times").
  llvm::StringSet<> attrNames;
  for (const auto &a : n.attribute())
    if (!attrNames.insert(a.name()).second)
      return emitError(loc_) << "has attribute '" << a.name() << "' more than once";
  Handler handler = handlers().lookup(n.op_type());
  if (!handler)
    return emitError(loc_) << "op '" << n.op_type() << "' is not supported";
  if (opset_ < kFullOpset && !unchangedSinceOpset1(n.op_type()))
    return emitError(loc_) << "op '" << n.op_type() << "' is read from opset " << kFullOpset
                           << " on; convert the model with onnx.version_converter";
  // Arity by the op's ONNX schema at this opset: a handler reads the
  // inputs it knows, so an extra one (Add with three) would be dropped
  // silently. Opsets past the linked ONNX library's take the op versions
  // it lacks from kNewerSchemas.
  const auto &known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range = known.find("");
  const int knownMax = range != known.end() ? range->second.second : 0;
  // An op used below the opset that defined it (LayerNormalization at 13)
  // is not the model its exporter meant: onnxruntime refuses it too.
  if (int64_t since = firstOpset(n.op_type(), knownMax); since > opset_)
    return emitError(loc_) << "op '" << n.op_type() << "' is defined from opset " << since
                           << ", but the model imports opset " << opset_;
  if (std::optional<SchemaFacts> schema = schemaAt(n.op_type(), opset_, knownMax)) {
    if (n.input_size() < schema->minIn || n.input_size() > schema->maxIn)
      return emitError(loc_) << "has " << n.input_size() << " inputs; " << n.op_type()
                             << " takes " << schema->minIn
                             << (schema->maxIn == schema->minIn
                                     ? std::string()
                                     : " to " + std::to_string(schema->maxIn))
                             << " at opset " << opset_;
    if (n.output_size() < schema->minOut || n.output_size() > schema->maxOut)
      return emitError(loc_) << "has " << n.output_size() << " outputs; " << n.op_type()
                             << " produces " << schema->minOut
                             << (schema->maxOut == schema->minOut
                                     ? std::string()
                                     : " to " + std::to_string(schema->maxOut))
                             << " at opset " << opset_;
    // An attribute the op does not have would be ignored (or read with an
    // older version's meaning: Reduce ops' `axes` before opset 18): ONNX's
    // checker refuses it too.
    for (const auto &a : n.attribute())
      if (!schema->attributes.contains(a.name()))
        return emitError(loc_) << "has attribute '" << a.name() << "', which " << n.op_type()
                               << " does not have at opset " << opset_;
  }
  state_.inputsRead.assign(n.input_size(), false);
  if (failed(handler(state_, n)))
    return failure();
  for (int i = 0; i < n.output_size(); ++i) {
    auto it = n.output(i).empty() ? values_.end() : values_.find(n.output(i));
    if (it == values_.end()) continue;
    if (auto t = dyn_cast<RankedTensorType>(it->second.getType());
        t && t.getNumElements() > opts_.maxElements)
      return emitError(loc_) << "output " << i << " ('" << n.output(i) << "') has "
                             << t.getNumElements() << " elements, over the limit of "
                             << opts_.maxElements << " (ds-opt --max-elements raises it)";
  }
  // An input the handler never looked at would be lost silently: an
  // operand of a newer opset than ds reads (an op gains inputs over
  // opsets), or an extra one the schema check above could not catch.
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !state_.inputsRead[i])
      return emitError(loc_) << "input " << i << " ('" << n.input(i) << "') is not read by ds's "
                             << n.op_type() << " at opset " << opset_
                             << ": ds does not support that input";
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !values_.count(n.output(i)) &&
        !state_.sequences.count(n.output(i)) && !state_.optionals.count(n.output(i)))
      return emitError(loc_) << "output " << i << " ('" << n.output(i)
                             << "') is not supported by ds";
  return success();
}

const HandlerTable &OnnxImporter::handlers() {
  static const HandlerTable table = [] {
    HandlerTable t;
    registerElementwiseHandlers(t);
    registerNNHandlers(t);
    registerMatMulHandlers(t);
    registerTensorHandlers(t);
    registerIndexingHandlers(t);
    registerConstantHandlers(t);
    registerReductionHandlers(t);
    registerQuantizationHandlers(t);
    registerLossHandlers(t);
    registerSequenceHandlers(t);
    registerAttentionHandlers(t);
    registerResizeHandlers(t);
    registerSpectralHandlers(t);
    registerControlFlowHandlers(t);
    registerRecurrentHandlers(t);
    return t;
  }();
  return table;
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

bool mlir::ds::parseInputShapeSpec(StringRef spec, ImportOptions &options,
                                   std::string &error) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || !spec.contains('=')) {
    error = "--input-shape expects NAME=d0,d1,... (got '" + spec.str() + "')";
    return false;
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  if (!dims.empty()) dims.split(parts, ',');
  for (StringRef p : parts) {
    int64_t d;
    if (p.trim().getAsInteger(10, d) || d < 0) {
      error = "--input-shape " + name.str() + ": '" + p.str() + "' is not a dimension";
      return false;
    }
    shape.push_back(d);
  }
  // Specs are parsed before --inputs/--data add their shapes: a name seen
  // already was given twice, and the last would silently win.
  if (options.inputShapes.count(name)) {
    error = "--input-shape names '" + name.str() + "' twice";
    return false;
  }
  options.inputShapes[name] = shape;
  return true;
}

bool mlir::ds::readDataShapes(const std::string &path, bool samples, ImportOptions &options,
                              std::string &error) {
  std::vector<std::pair<std::string, ::ds::rt::HostArray>> arrays;
  if (StringRef(path).ends_with(".npy")) {
    auto a = ::ds::rt::readNpy(path);
    if (!a.ok()) return error = std::string(a.status().message()), false;
    arrays.emplace_back("", std::move(*a));
  } else {
    auto z = ::ds::rt::readNpz(path);
    if (!z.ok()) return error = std::string(z.status().message()), false;
    arrays = std::move(*z);
  }
  for (auto &[name, a] : arrays) {
    if (samples && a.shape.empty())
      return error = path + "['" + name + "'] is a scalar; training data needs a leading "
                                          "sample dimension",
             false;
    options.dataShapes[name] = SmallVector<int64_t>(a.shape.begin(), a.shape.end());
  }
  options.dataSource = path;
  options.dataHasSampleDim = samples;
  return true;
}

bool mlir::ds::parseBindInputSpec(StringRef spec, ImportOptions &options, std::string &error) {
  auto [name, path] = spec.split('=');
  if (name.empty() || path.empty()) {
    error = "--bind-input expects NAME=FILE.npy (got '" + spec.str() + "')";
    return false;
  }
  if (options.boundInputs.count(name)) {
    error = "--bind-input names '" + name.str() + "' twice";
    return false;
  }
  options.boundInputs[name] = path.str();
  return true;
}

static bool editsModel(const ImportOptions &options) {
  return options.training || !options.untie.empty() || !options.tie.empty();
}

/// Training recovers the parameters PyTorch trains from the exporter's
/// records (editing `model`); inference only reads which are buffers.
static FailureOr<ParameterRecovery> recover(MLIRContext *context, onnx::ModelProto &model,
                                            const std::string &path, const ImportOptions &options,
                                            bool edit) {
  ParameterRecoveryOptions ro;
  ro.edit = edit;
  ro.tie = options.tie;
  ro.untie = options.untie;
  ro.modelDir = llvm::sys::path::parent_path(path).str();
  ro.shapesOnly = options.shapesOnly;
  if (ro.modelDir.empty()) ro.modelDir = ".";
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  auto r = recoverParameters(model, ro);
  if (!r) {
    emitError(loc) << llvm::toString(r.takeError());
    return failure();
  }
  for (const std::string &note : r->notes) emitRemark(loc) << note;
  return std::move(*r);
}

static OwningOpRef<ModuleOp> importModel(MLIRContext *context, onnx::ModelProto &model,
                                         const std::string &path, const ImportOptions &options,
                                         bool consume) {
  context->loadDialect<DSDialect, func::FuncDialect>();
  FailureOr<ParameterRecovery> recovered =
      recover(context, model, path, options, editsModel(options));
  if (failed(recovered)) return nullptr;
  ImportState state(context, options, path);
  state.consumeModel = consume;
  state.recovery = &*recovered;
  OnnxImporter importer(state);
  OwningOpRef<ModuleOp> module = importer.run(model);
  if (!module) return nullptr;
  // Renamed initializers, for the copy of the source model a training
  // plan keeps (ds-opt reads it again without the trained weights' data).
  if (!recovered->renamed.empty()) {
    Builder b(context);
    SmallVector<NamedAttribute> renamed;
    for (const auto &[from, to] : recovered->renamed)
      renamed.push_back(b.getNamedAttr(from, b.getStringAttr(to)));
    (*module)->setAttr("ds.renamed_initializers", b.getDictionaryAttr(renamed));
  }
  // Constants used only to compute shapes, and parameters nothing reads.
  SmallVector<Operation *> dead;
  module->walk([&](Operation *op) {
    if (isa<ConstantOp, ParameterOp>(op) && op->use_empty()) dead.push_back(op);
  });
  for (Operation *op : dead) op->erase();
  return module;
}

OwningOpRef<ModuleOp> mlir::ds::importOnnxModel(MLIRContext *context,
                                                const onnx::ModelProto &model,
                                                const std::string &path,
                                                const ImportOptions &options) {
  // Only training edits the model (recovering its parameters): then on a copy.
  if (!editsModel(options))
    return importModel(context, const_cast<onnx::ModelProto &>(model), path, options,
                       /*consume=*/false);
  onnx::ModelProto copy = model;
  return importModel(context, copy, path, options, /*consume=*/false);
}

OwningOpRef<ModuleOp> mlir::ds::importOnnxFile(MLIRContext *context, const std::string &path,
                                               const ImportOptions &options) {
  auto model = readModelFile(path);
  if (!model) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << llvm::toString(model.takeError());
    return nullptr;
  }
  // The model is ours: its weights move into the IR rather than being copied.
  return importModel(context, *model, path, options, /*consume=*/true);
}
