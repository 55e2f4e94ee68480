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
//===----------------------------------------------------------------------===//
#include "ds/Import/OnnxImporter.h"

#include <cmath>
#include <cctype>
#include <functional>
#include <map>
#include <limits>
#include <numeric>

#include "dialects/ds/DSOps.h"
#include "ds/Import/OnnxModelFile.h"
#include "runtime/io/Npy.h"
#include "ds/Plan/HostEvaluator.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::ds;

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
constexpr int64_t kMaxOpset = 21;

class OnnxImporter;
using Handler = LogicalResult (OnnxImporter::*)(const onnx::NodeProto &);

class OnnxImporter {
public:
  OnnxImporter(MLIRContext *ctx, const ImportOptions &opts, std::string path)
      : ctx_(ctx), b_(ctx), opts_(opts), path_(std::move(path)) {
    dir_ = llvm::sys::path::parent_path(path_).str();
    if (dir_.empty()) dir_ = ".";
  }

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model);

private:
  // ---- diagnostics ---------------------------------------------------------
  InFlightDiagnostic fileError() { return emitError(FileLineColLoc::get(ctx_, path_, 0, 0)); }
  InFlightDiagnostic nodeError(const onnx::NodeProto &) { return emitError(loc_); }

  // ---- values ----------------------------------------------------------------
  Value input(const onnx::NodeProto &n, int i) {
    if (i >= n.input_size() || n.input(i).empty()) return nullptr;
    auto it = values_.find(n.input(i));
    return it == values_.end() ? nullptr : it->second;
  }
  FailureOr<Value> required(const onnx::NodeProto &n, int i) {
    Value v = input(n, i);
    if (!v) {
      nodeError(n) << "needs input " << i;
      return failure();
    }
    return v;
  }
  void setOutput(const onnx::NodeProto &n, int i, Value v) {
    if (i < n.output_size() && !n.output(i).empty()) values_[n.output(i)] = v;
  }
  RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

  /// The constant behind `v`, if import-time folding produced one.
  DenseElementsAttr constantOf(Value v) {
    if (!v) return nullptr;
    if (auto c = v.getDefiningOp<ConstantOp>()) return dyn_cast<DenseElementsAttr>(c.getValue());
    return nullptr;
  }
  /// Integer values of an input that must be known at compile time.
  FailureOr<SmallVector<int64_t>> constantInts(const onnx::NodeProto &n, int i,
                                               StringRef what) {
    Value v = input(n, i);
    DenseElementsAttr c = constantOf(v);
    if (!c || !isa<IntegerType>(c.getElementType())) {
      nodeError(n) << "input '" << what << "' must be a constant integer tensor known at "
                   << "compile time (fix dynamic input dimensions with --input-shape)";
      return failure();
    }
    SmallVector<int64_t> out;
    for (const APInt &x : c.getValues<APInt>()) out.push_back(x.getSExtValue());
    return out;
  }

  Value constant(DenseElementsAttr value) {
    return ConstantOp::create(b_, loc_, value).getResult();
  }
  Value scalar(Type elem, double v) {
    auto t = RankedTensorType::get({}, elem);
    if (isa<FloatType>(elem))
      return constant(DenseElementsAttr::get(t, b_.getFloatAttr(elem, v)));
    return constant(DenseElementsAttr::get(t, b_.getIntegerAttr(elem, static_cast<int64_t>(v))));
  }
  Value i64Tensor(ArrayRef<int64_t> v) {
    auto t = RankedTensorType::get({static_cast<int64_t>(v.size())}, b_.getI64Type());
    return constant(DenseElementsAttr::get(t, v));
  }

  // ---- building ops with checked inference -----------------------------------
  /// Creates a ds op whose result types are inferred; inference failures
  /// are reported at the node instead of aborting.
  template <typename OpTy>
  FailureOr<Value> build(ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
    typename OpTy::Properties props;
    DictionaryAttr dict = b_.getDictionaryAttr(attrs);
    if (failed(OpTy::setPropertiesFromAttr(props, dict, [&] { return emitError(loc_); })))
      return failure();
    SmallVector<Type> types;
    if (failed(OpTy::inferReturnTypes(ctx_, loc_, operands, dict, OpaqueProperties(&props),
                                      {}, types)))
      return failure();
    return buildTyped<OpTy>(types, operands, attrs);
  }
  template <typename OpTy>
  FailureOr<SmallVector<Value>> buildAll(TypeRange types, ValueRange operands,
                                         ArrayRef<NamedAttribute> attrs = {}) {
    auto op = OpTy::create(b_, loc_, types, operands, attrs);
    if (failed(mlir::verify(op))) {
      op->erase();
      return failure();
    }
    // Values computable now are folded now: later nodes may need them as
    // compile-time constants (shapes, axes).
    if (auto folded = tryFoldWithKernels(op, opts_.foldLimit))
      return *folded;
    return SmallVector<Value>(op->getResults());
  }
  template <typename OpTy>
  FailureOr<Value> buildTyped(TypeRange types, ValueRange operands,
                              ArrayRef<NamedAttribute> attrs = {}) {
    auto r = buildAll<OpTy>(types, operands, attrs);
    if (failed(r)) return failure();
    return (*r)[0];
  }
  FailureOr<Value> castTo(Value v, Type elem) {
    if (typeOf(v).getElementType() == elem) return v;
    return buildTyped<CastOp>(RankedTensorType::get(typeOf(v).getShape(), elem), v);
  }
  NamedAttribute attr(StringRef name, Attribute a) { return b_.getNamedAttr(name, a); }
  NamedAttribute i64Attr(StringRef name, int64_t v) {
    return attr(name, b_.getI64IntegerAttr(v));
  }
  NamedAttribute arrAttr(StringRef name, ArrayRef<int64_t> v) {
    return attr(name, b_.getDenseI64ArrayAttr(v));
  }
  FailureOr<Value> reshape(Value v, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (t == v.getType()) return v;
    return buildTyped<ReshapeOp>(t, v);
  }

  // ---- attributes ----------------------------------------------------------------
  const onnx::AttributeProto *findAttr(const onnx::NodeProto &n, StringRef name) {
    for (const auto &a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  FailureOr<int64_t> intAttr(const onnx::NodeProto &n, StringRef name,
                             std::optional<int64_t> dflt = std::nullopt) {
    const auto *a = findAttr(n, name);
    if (!a) {
      if (dflt) return *dflt;
      nodeError(n) << "needs attribute '" << name << "'";
      return failure();
    }
    if (a->type() != onnx::AttributeProto_AttributeType_INT) {
      nodeError(n) << "attribute '" << name << "' must be an int";
      return failure();
    }
    return a->i();
  }
  FailureOr<float> floatAttr(const onnx::NodeProto &n, StringRef name, float dflt) {
    const auto *a = findAttr(n, name);
    if (!a) return dflt;
    if (a->type() != onnx::AttributeProto_AttributeType_FLOAT) {
      nodeError(n) << "attribute '" << name << "' must be a float";
      return failure();
    }
    return a->f();
  }
  FailureOr<std::string> stringAttr(const onnx::NodeProto &n, StringRef name,
                                    StringRef dflt) {
    const auto *a = findAttr(n, name);
    if (!a) return dflt.str();
    if (a->type() != onnx::AttributeProto_AttributeType_STRING) {
      nodeError(n) << "attribute '" << name << "' must be a string";
      return failure();
    }
    return a->s();
  }
  FailureOr<std::optional<SmallVector<int64_t>>> intsAttr(const onnx::NodeProto &n,
                                                          StringRef name) {
    const auto *a = findAttr(n, name);
    if (!a) return std::optional<SmallVector<int64_t>>();
    if (a->type() != onnx::AttributeProto_AttributeType_INTS) {
      nodeError(n) << "attribute '" << name << "' must be a list of ints";
      return failure();
    }
    return std::optional<SmallVector<int64_t>>(
        SmallVector<int64_t>(a->ints().begin(), a->ints().end()));
  }
  /// Axes from an attribute (older opsets) or the given input (newer).
  FailureOr<std::optional<SmallVector<int64_t>>> axesOf(const onnx::NodeProto &n,
                                                        int inputIndex) {
    if (input(n, inputIndex)) {
      auto v = constantInts(n, inputIndex, "axes");
      if (failed(v)) return failure();
      return std::optional<SmallVector<int64_t>>(*v);
    }
    return intsAttr(n, "axes");
  }
  LogicalResult normalizeAxis(const onnx::NodeProto &n, int64_t &axis, int64_t rank) {
    if (axis < -rank || axis >= rank)
      return nodeError(n) << "axis " << axis << " is out of range for rank " << rank;
    if (axis < 0) axis += rank;
    return success();
  }
  LogicalResult normalizeAxes(const onnx::NodeProto &n, SmallVector<int64_t> &axes,
                              int64_t rank) {
    for (int64_t &a : axes)
      if (failed(normalizeAxis(n, a, rank))) return failure();
    llvm::sort(axes);
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      return nodeError(n) << "axes repeat";
    return success();
  }

  // ---- types and tensors ------------------------------------------------------------
  FailureOr<Type> elementType(int32_t onnxType) {
    switch (onnxType) {
    case onnx::TensorProto_DataType_FLOAT: return b_.getF32Type();
    case onnx::TensorProto_DataType_DOUBLE: return b_.getF64Type();
    case onnx::TensorProto_DataType_FLOAT16: return b_.getF16Type();
    case onnx::TensorProto_DataType_BFLOAT16: return b_.getBF16Type();
    case onnx::TensorProto_DataType_INT8: return b_.getIntegerType(8);
    case onnx::TensorProto_DataType_INT16: return b_.getIntegerType(16);
    case onnx::TensorProto_DataType_INT32: return b_.getI32Type();
    case onnx::TensorProto_DataType_INT64: return b_.getI64Type();
    case onnx::TensorProto_DataType_UINT8: return b_.getIntegerType(8, false);
    case onnx::TensorProto_DataType_UINT16: return b_.getIntegerType(16, false);
    case onnx::TensorProto_DataType_UINT32: return b_.getIntegerType(32, false);
    case onnx::TensorProto_DataType_UINT64: return b_.getIntegerType(64, false);
    case onnx::TensorProto_DataType_BOOL: return b_.getI1Type();
    default: return failure();
    }
  }
  /// A tensor proto as an attribute: dense_resource when large (weights),
  /// dense otherwise.
  FailureOr<TypedAttr> tensorAttr(const onnx::TensorProto &t, Location loc) {
    auto payload = readTensorPayload(t, dir_);
    if (!payload) {
      emitError(loc) << llvm::toString(payload.takeError());
      return failure();
    }
    FailureOr<Type> elem = elementType(payload->dataType);
    if (failed(elem)) {
      emitError(loc) << "tensor '" << t.name() << "' has unsupported element type "
                     << onnxTypeName(payload->dataType);
      return failure();
    }
    auto type = RankedTensorType::get(payload->shape, *elem);
    if (static_cast<int64_t>(payload->bytes.size()) >= opts_.resourceThresholdBytes &&
        !elem->isInteger(1)) {
      std::string key = t.name().empty() ? "tensor" : t.name();
      return cast<TypedAttr>(DenseResourceElementsAttr::get(
          type, key,
          HeapAsmResourceBlob::allocateAndCopyWithAlign(payload->bytes, alignof(uint64_t))));
    }
    ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>(payload->bytes.data()),
                            payload->bytes.size());
    return cast<TypedAttr>(denseFromBytes(type, bytes));
  }

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
    if (*dt != arr->dtype) {
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
    return cast<TypedAttr>(denseFromBytes(type, arr->data));
  }

  // ---- graph ------------------------------------------------------------------------
  LogicalResult importGraph(const onnx::GraphProto &g, func::FuncOp &func);
  LogicalResult importNode(const onnx::NodeProto &n, int index);
  Location nodeLocation(const onnx::NodeProto &n, int index);

  // ---- op handlers --------------------------------------------------------------------
  template <typename OpTy> LogicalResult unary(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult binary(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult variadic(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult reduce(const onnx::NodeProto &n);
  LogicalResult reduceComposite(const onnx::NodeProto &n);
  FailureOr<SmallVector<int64_t>> reductionAxes(const onnx::NodeProto &n, int64_t rank,
                                                bool isSum);
  template <typename OpTy>
  FailureOr<Value> reduceWith(Value x, ArrayRef<int64_t> axes, bool keepdims);
  template <typename OpTy> LogicalResult softmax(const onnx::NodeProto &n);
  LogicalResult identity(const onnx::NodeProto &n);
  LogicalResult dropout(const onnx::NodeProto &n);
  LogicalResult constantNode(const onnx::NodeProto &n);
  LogicalResult pow(const onnx::NodeProto &n);
  LogicalResult mean(const onnx::NodeProto &n);
  LogicalResult gelu(const onnx::NodeProto &n);
  LogicalResult castNode(const onnx::NodeProto &n);
  LogicalResult castLike(const onnx::NodeProto &n);
  LogicalResult where(const onnx::NodeProto &n);
  LogicalResult matmul(const onnx::NodeProto &n);
  LogicalResult gemm(const onnx::NodeProto &n);
  LogicalResult layerNorm(const onnx::NodeProto &n);
  LogicalResult reshapeNode(const onnx::NodeProto &n);
  LogicalResult flatten(const onnx::NodeProto &n);
  LogicalResult transpose(const onnx::NodeProto &n);
  LogicalResult slice(const onnx::NodeProto &n);
  LogicalResult split(const onnx::NodeProto &n);
  LogicalResult concat(const onnx::NodeProto &n);
  LogicalResult gather(const onnx::NodeProto &n);
  LogicalResult expand(const onnx::NodeProto &n);
  LogicalResult squeeze(const onnx::NodeProto &n);
  LogicalResult unsqueeze(const onnx::NodeProto &n);
  LogicalResult shape(const onnx::NodeProto &n);
  LogicalResult size(const onnx::NodeProto &n);
  LogicalResult constantOfShape(const onnx::NodeProto &n);
  LogicalResult range(const onnx::NodeProto &n);
  LogicalResult clip(const onnx::NodeProto &n);
  LogicalResult isNan(const onnx::NodeProto &n);
  LogicalResult leakyRelu(const onnx::NodeProto &n);
  LogicalResult mod(const onnx::NodeProto &n);
  LogicalResult isInf(const onnx::NodeProto &n);
  LogicalResult trilu(const onnx::NodeProto &n);
  LogicalResult cumsum(const onnx::NodeProto &n);
  LogicalResult softmaxCrossEntropyLoss(const onnx::NodeProto &n);
  LogicalResult activation(const onnx::NodeProto &n);
  LogicalResult gatherElements(const onnx::NodeProto &n);
  LogicalResult conv(const onnx::NodeProto &n);
  LogicalResult pool(const onnx::NodeProto &n);
  FailureOr<SmallVector<int64_t>> windowPads(const onnx::NodeProto &n, ArrayRef<int64_t> in,
                                             ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                             ArrayRef<int64_t> dilations);
  LogicalResult globalPool(const onnx::NodeProto &n);
  LogicalResult prelu(const onnx::NodeProto &n);
  LogicalResult tile(const onnx::NodeProto &n);
  LogicalResult pad(const onnx::NodeProto &n);
  LogicalResult gatherND(const onnx::NodeProto &n);
  LogicalResult depthSpace(const onnx::NodeProto &n);
  LogicalResult shrink(const onnx::NodeProto &n);
  LogicalResult eyeLike(const onnx::NodeProto &n);
  FailureOr<Value> padWith(const onnx::NodeProto &n, Value x, ArrayRef<int64_t> lo,
                           ArrayRef<int64_t> hi, StringRef mode, Attribute fill);
  LogicalResult convTranspose(const onnx::NodeProto &n);
  LogicalResult instanceNorm(const onnx::NodeProto &n);
  FailureOr<Value> perChannel(const onnx::NodeProto &n, Value v, Value x);
  FailureOr<Value> legacyBroadcast(const onnx::NodeProto &n, Value a, Value c);
  FailureOr<Value> sliceAxis(Value x, int64_t axis, int64_t start, int64_t step, int64_t count);
  LogicalResult hardmax(const onnx::NodeProto &n);
  LogicalResult oneHot(const onnx::NodeProto &n);
  Value iota(int64_t n, int64_t axis, int64_t rank, Type elem);
  LogicalResult nllLossNode(const onnx::NodeProto &n);
  FailureOr<Value> nllLoss(const onnx::NodeProto &n, Value logProb, Value target, Value weight,
                           StringRef reduction);
  template <typename OpTy> LogicalResult argReduce(const onnx::NodeProto &n);
  LogicalResult batchNorm(const onnx::NodeProto &n);
  FailureOr<Value> linearIndex(const onnx::NodeProto &n, Value idx, ArrayRef<int64_t> dims);
  LogicalResult scatterElements(const onnx::NodeProto &n);
  LogicalResult scatterND(const onnx::NodeProto &n);
  LogicalResult topK(const onnx::NodeProto &n);
  LogicalResult einsum(const onnx::NodeProto &n);
  FailureOr<Value> alongAxis(const onnx::NodeProto &n, Value v, Value x, int64_t axis);
  FailureOr<Value> quantize(const onnx::NodeProto &n, Value y, Value zeroPoint, Type qType);
  FailureOr<Value> centered(const onnx::NodeProto &n, Value x, Value zeroPoint, bool rowwise);
  LogicalResult quantizeLinear(const onnx::NodeProto &n);
  LogicalResult dequantizeLinear(const onnx::NodeProto &n);
  LogicalResult dynamicQuantizeLinear(const onnx::NodeProto &n);
  LogicalResult matmulInteger(const onnx::NodeProto &n);
  LogicalResult qlinearMatmul(const onnx::NodeProto &n);
  LogicalResult window(const onnx::NodeProto &n);
  LogicalResult meanVarianceNorm(const onnx::NodeProto &n);
  LogicalResult bitShift(const onnx::NodeProto &n);

  static const llvm::StringMap<Handler> &handlers();

  MLIRContext *ctx_;
  OpBuilder b_;
  const ImportOptions &opts_;
  std::string path_, dir_;
  int64_t opset_ = 0;
  Location loc_ = UnknownLoc::get(ctx_);
  llvm::StringMap<Value> values_;
};

//===----------------------------------------------------------------------===//
// Model and graph
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> OnnxImporter::run(const onnx::ModelProto &model) {
  bool haveDefault = false;
  for (const auto &os : model.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") {
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

LogicalResult OnnxImporter::importGraph(const onnx::GraphProto &g, func::FuncOp &func) {
  llvm::StringSet<> defined;
  auto define = [&](const std::string &name, Location loc) -> LogicalResult {
    if (name.empty()) return success();
    if (!defined.insert(name).second)
      return emitError(loc) << "value '" << name << "' is defined more than once";
    return success();
  };

  // Graph inputs that are not initializers become function arguments.
  llvm::StringSet<> initializerNames;
  for (const auto &t : g.initializer()) initializerNames.insert(t.name());
  if (g.sparse_initializer_size() > 0)
    return fileError() << "sparse initializers are not supported";

  llvm::StringSet<> inputNames;
  for (const auto &vi : g.input())
    if (!initializerNames.contains(vi.name())) inputNames.insert(vi.name());
  for (const auto &kv : opts_.boundInputs)
    if (!inputNames.contains(kv.getKey()))
      return fileError() << "--bind-input names '" << kv.getKey()
                         << "', which is not an input of the graph";
  for (const auto &kv : opts_.inputShapes)
    if (!inputNames.contains(kv.getKey()))
      return fileError() << "--input-shape names '" << kv.getKey()
                         << "', which is not an input of the graph";

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<std::pair<std::string, TypedAttr>> bound;
  for (const auto &vi : g.input()) {
    if (initializerNames.contains(vi.name())) continue;
    Location loc = NameLoc::get(b_.getStringAttr("graph input '" + vi.name() + "'"));
    if (auto it = opts_.boundInputs.find(vi.name()); it != opts_.boundInputs.end()) {
      FailureOr<TypedAttr> value = boundValue(vi, it->second, loc);
      if (failed(value)) return failure();
      bound.push_back({vi.name(), *value});
      if (failed(define(vi.name(), loc))) return failure();
      continue;
    }
    if (!vi.type().has_tensor_type())
      return emitError(loc) << "is not a tensor";
    const auto &tt = vi.type().tensor_type();
    FailureOr<Type> elem = elementType(tt.elem_type());
    if (failed(elem))
      return emitError(loc) << "has unsupported element type " << onnxTypeName(tt.elem_type());
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
    } else {
      if (!tt.has_shape())
        return emitError(loc) << "has no shape; give one with --input-shape " << vi.name()
                              << "=d0,d1,...";
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto &d = tt.shape().dim(i);
        if (!d.has_dim_value() || d.dim_value() < 0)
          return emitError(loc) << "dimension " << i
                                << (d.has_dim_param() ? " ('" + d.dim_param() + "')" : "")
                                << " is dynamic; fix it at compile time with --input-shape "
                                << vi.name() << "=d0,d1,...";
        shape.push_back(d.dim_value());
      }
    }
    if (shape.size() > kMaxTensorRank)
      return emitError(loc) << "has rank over 1024";
    argTypes.push_back(RankedTensorType::get(shape, *elem));
    argNames.push_back(vi.name());
    if (failed(define(vi.name(), loc))) return failure();
  }

  func = func::FuncOp::create(b_, FileLineColLoc::get(ctx_, path_, 0, 0), "main",
                              b_.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "ds.name", b_.getStringAttr(name));
    values_[name] = body->getArgument(i);
  }
  b_.setInsertionPointToEnd(body);
  for (auto &[name, value] : bound)
    values_[name] = ConstantOp::create(
                        b_, NameLoc::get(b_.getStringAttr("bound input '" + name + "'")), value)
                        .getResult();

  // Initializers: float tensors are parameters (weights); the rest are
  // constants (index tables, shapes) that folding may use.
  for (const auto &t : g.initializer()) {
    Location loc = NameLoc::get(b_.getStringAttr("initializer '" + t.name() + "'"));
    if (t.name().empty()) return emitError(loc) << "has no name";
    if (failed(define(t.name(), loc))) return failure();
    loc_ = loc;
    FailureOr<TypedAttr> value = tensorAttr(t, loc);
    if (failed(value)) return failure();
    Type elem = cast<ShapedType>(value->getType()).getElementType();
    if (isa<FloatType>(elem))
      values_[t.name()] = ParameterOp::create(b_, loc, t.name(), *value).getResult();
    else
      values_[t.name()] = ConstantOp::create(b_, loc, *value).getResult();
  }

  for (int i = 0; i < g.node_size(); ++i) {
    const auto &n = g.node(i);
    loc_ = nodeLocation(n, i);
    for (const auto &in : n.input())
      if (!in.empty() && !values_.count(in))
        return emitError(loc_) << "input '" << in << "' is not defined before the node "
                               << "(undefined, or the graph is not topologically sorted / "
                               << "has a cycle)";
    for (const auto &out : n.output())
      if (failed(define(out, loc_))) return failure();
    if (failed(importNode(n, i))) return failure();
  }

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &vi : g.output()) {
    auto it = values_.find(vi.name());
    Location loc = NameLoc::get(b_.getStringAttr("graph output '" + vi.name() + "'"));
    if (it == values_.end())
      return emitError(loc) << "is not produced by any node";
    Value v = it->second;
    if (vi.type().has_tensor_type()) {
      FailureOr<Type> elem = elementType(vi.type().tensor_type().elem_type());
      if (succeeded(elem) && *elem != typeOf(v).getElementType())
        return emitError(loc) << "is declared " << *elem << " but computes "
                              << typeOf(v).getElementType();
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  func::ReturnOp::create(b_, func.getLoc(), results);
  func.setFunctionType(b_.getFunctionType(argTypes, resultTypes));
  for (auto [i, vi] : llvm::enumerate(g.output()))
    func.setResultAttr(i, "ds.name", b_.getStringAttr(vi.name()));
  return success();
}

LogicalResult OnnxImporter::importNode(const onnx::NodeProto &n, int index) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return emitError(loc_) << "domain '" << n.domain() << "' is not supported";
  for (const auto &a : n.attribute())
    if (a.type() == onnx::AttributeProto_AttributeType_GRAPH ||
        a.type() == onnx::AttributeProto_AttributeType_GRAPHS)
      return emitError(loc_) << "subgraph attributes (If/Loop/Scan) are not supported";
  const auto &table = handlers();
  auto it = table.find(n.op_type());
  if (it == table.end())
    return emitError(loc_) << "op '" << n.op_type() << "' is not supported";
  if (opset_ < kFullOpset && !unchangedSinceOpset1(n.op_type()))
    return emitError(loc_) << "op '" << n.op_type() << "' is read from opset " << kFullOpset
                           << " on; convert the model with onnx.version_converter";
  if (failed((this->*(it->second))(n)))
    return failure();
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !values_.count(n.output(i)))
      return emitError(loc_) << "output " << i << " ('" << n.output(i)
                             << "') is not supported by ds";
  return success();
}

//===----------------------------------------------------------------------===//
// Op handlers
//===----------------------------------------------------------------------===//

#define DS_TRY(lhs, expr)                                                      \
  auto lhs##OrFail = (expr);                                                   \
  if (failed(lhs##OrFail))                                                     \
    return failure();                                                          \
  auto lhs = *lhs##OrFail

template <typename OpTy> LogicalResult OnnxImporter::unary(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(y, buildTyped<OpTy>(x.getType(), x));
  setOutput(n, 0, y);
  return success();
}

/// "[2x3]", as the dialect's verifiers print shapes.
static std::string shapeText(ArrayRef<int64_t> shape) {
  return "[" + llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x") + "]";
}

/// Opset 6 and older broadcast only when `broadcast` = 1, aligning the
/// right operand's dimensions with the left's starting at `axis` (by default
/// its trailing ones). A reshape to trailing ones turns that into numpy
/// broadcasting.
FailureOr<Value> OnnxImporter::legacyBroadcast(const onnx::NodeProto &n, Value a, Value c) {
  static const llvm::StringSet<> legacy = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or",
                                            "Xor", "Equal", "Less", "Greater"};
  if (opset_ >= 7 || !legacy.contains(n.op_type())) return c;
  ArrayRef<int64_t> as = typeOf(a).getShape(), cs = typeOf(c).getShape();
  DS_TRY(bcast, intAttr(n, "broadcast", 0));
  if (!bcast) {
    if (as != cs)
      return FailureOr<Value>(nodeError(n) << "operand shapes " << shapeText(as) << " and "
                                           << shapeText(cs) << " differ and broadcast is 0");
    return c;
  }
  int64_t rankA = as.size(), rankC = cs.size();
  DS_TRY(axis, intAttr(n, "axis", rankA - rankC));
  if (axis < 0) axis += rankA;
  if (axis < 0 || axis + rankC > rankA)
    return FailureOr<Value>(nodeError(n) << "axis " << axis << " does not place a "
                                         << shapeText(cs) << " operand inside " << shapeText(as));
  for (int64_t i = 0; i < rankC; ++i)
    if (cs[i] != 1 && cs[i] != as[axis + i])
      return FailureOr<Value>(nodeError(n) << "operand " << shapeText(cs) << " does not match "
                                           << shapeText(as) << " at axis " << axis);
  SmallVector<int64_t> shape(cs);
  shape.append(rankA - axis - rankC, 1);
  return reshape(c, shape);
}

template <typename OpTy> LogicalResult OnnxImporter::binary(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(c0, required(n, 1));
  DS_TRY(c, legacyBroadcast(n, a, c0));
  DS_TRY(y, build<OpTy>({a, c}));
  setOutput(n, 0, y);
  return success();
}

/// Min, Max, Sum: a left fold of the binary op over all inputs.
template <typename OpTy> LogicalResult OnnxImporter::variadic(const onnx::NodeProto &n) {
  DS_TRY(acc, required(n, 0));
  for (int i = 1; i < n.input_size(); ++i) {
    DS_TRY(x, required(n, i));
    DS_TRY(next, build<OpTy>({acc, x}));
    acc = next;
  }
  setOutput(n, 0, acc);
  return success();
}

LogicalResult OnnxImporter::mean(const onnx::NodeProto &n) {
  if (failed(variadic<AddOp>(n))) return failure();
  Value sum = values_[n.output(0)];
  Type elem = typeOf(sum).getElementType();
  if (!isa<FloatType>(elem)) return nodeError(n) << "Mean needs floating-point inputs";
  DS_TRY(y, build<DivOp>({sum, scalar(elem, n.input_size())}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::pow(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(e0, required(n, 1));
  DS_TRY(e, legacyBroadcast(n, x, e0));
  // ONNX lets the exponent's type differ from the base's.
  if (typeOf(e).getElementType() != typeOf(x).getElementType()) {
    auto t = RankedTensorType::get(typeOf(e).getShape(), typeOf(x).getElementType());
    DS_TRY(ce, buildTyped<CastOp>(t, e));
    e = ce;
  }
  DS_TRY(y, build<PowOp>({x, e}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::identity(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  setOutput(n, 0, x);
  return success();
}

LogicalResult OnnxImporter::dropout(const onnx::NodeProto &n) {
  // Inference: the identity, and an all-true mask if anyone asks for it.
  DS_TRY(x, required(n, 0));
  DS_TRY(isTest, intAttr(n, "is_test", 0));
  if (opset_ < 7 && !isTest)
    return nodeError(n) << "training-mode Dropout (is_test = 0) is not supported";
  if (input(n, 2)) {
    DenseElementsAttr mode = constantOf(input(n, 2));
    DenseElementsAttr ratio = constantOf(input(n, 1));
    // Training with ratio 0 drops nothing: the identity, as in inference.
    bool zeroRatio = ratio && ratio.isSplat() && isa<FloatType>(ratio.getElementType()) &&
                     ratio.getSplatValue<APFloat>().isZero();
    if (!mode)
      return nodeError(n) << "training_mode must be known at compile time (a constant, or "
                          << "bound with --bind-input)";
    if (mode.getSplatValue<bool>() && !zeroRatio)
      return nodeError(n) << "training-mode Dropout (random masks) is not supported";
  }
  setOutput(n, 0, x);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    auto t = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
    setOutput(n, 1, constant(DenseElementsAttr::get(t, true)));
  }
  return success();
}

LogicalResult OnnxImporter::constantNode(const onnx::NodeProto &n) {
  if (n.attribute_size() != 1)
    return nodeError(n) << "needs exactly one value attribute";
  const auto &a = n.attribute(0);
  const std::string &name = a.name();
  if (name == "value") {
    if (a.type() != onnx::AttributeProto_AttributeType_TENSOR)
      return nodeError(n) << "attribute 'value' must be a tensor";
    FailureOr<TypedAttr> v = tensorAttr(a.t(), loc_);
    if (failed(v)) return failure();
    setOutput(n, 0, ConstantOp::create(b_, loc_, *v).getResult());
    return success();
  }
  if (name == "value_float" && a.type() == onnx::AttributeProto_AttributeType_FLOAT) {
    setOutput(n, 0, scalar(b_.getF32Type(), a.f()));
    return success();
  }
  if (name == "value_int" && a.type() == onnx::AttributeProto_AttributeType_INT) {
    setOutput(n, 0, scalar(b_.getI64Type(), static_cast<double>(a.i())));
    if (a.i() != static_cast<int64_t>(static_cast<double>(a.i())))
      setOutput(n, 0, constant(DenseElementsAttr::get(
                          RankedTensorType::get({}, b_.getI64Type()), APInt(64, a.i()))));
    return success();
  }
  if (name == "value_floats" && a.type() == onnx::AttributeProto_AttributeType_FLOATS) {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    auto t = RankedTensorType::get({static_cast<int64_t>(v.size())}, b_.getF32Type());
    setOutput(n, 0, constant(DenseElementsAttr::get(t, ArrayRef<float>(v))));
    return success();
  }
  if (name == "value_ints" && a.type() == onnx::AttributeProto_AttributeType_INTS) {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    setOutput(n, 0, i64Tensor(v));
    return success();
  }
  return nodeError(n) << "attribute '" << name << "' of this type is not supported";
}

LogicalResult OnnxImporter::gelu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(approx, stringAttr(n, "approximate", "none"));
  auto kind = symbolizeGeluApproximation(approx);
  if (!kind) return nodeError(n) << "unknown approximation '" << approx << "'";
  DS_TRY(y, buildTyped<GeluOp>(x.getType(), x,
                               {attr("approximate", GeluApproximationAttr::get(ctx_, *kind))}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::castNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(to, intAttr(n, "to"));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(to));
  if (failed(elem))
    return nodeError(n) << "cannot cast to " << onnxTypeName(static_cast<int32_t>(to));
  DS_TRY(y, buildTyped<CastOp>(RankedTensorType::get(typeOf(x).getShape(), *elem), x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::castLike(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(like, required(n, 1));
  DS_TRY(y, buildTyped<CastOp>(
                RankedTensorType::get(typeOf(x).getShape(), typeOf(like).getElementType()), x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::where(const onnx::NodeProto &n) {
  DS_TRY(c, required(n, 0));
  DS_TRY(x, required(n, 1));
  DS_TRY(y, required(n, 2));
  DS_TRY(r, build<WhereOp>({c, x, y}));
  setOutput(n, 0, r);
  return success();
}

LogicalResult OnnxImporter::matmul(const onnx::NodeProto &n) { return binary<MatmulOp>(n); }

LogicalResult OnnxImporter::gemm(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(bm, required(n, 1));
  DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
  DS_TRY(beta, floatAttr(n, "beta", 1.0f));
  DS_TRY(transA, intAttr(n, "transA", 0));
  DS_TRY(transB, intAttr(n, "transB", 0));
  if (typeOf(a).getRank() != 2 || typeOf(bm).getRank() != 2)
    return nodeError(n) << "Gemm needs 2-D operands";
  auto transposed = [&](Value v) -> FailureOr<Value> {
    // A transposed weight is stored transposed: done once here, not per run.
    if (auto p = v.getDefiningOp<ParameterOp>()) {
      auto t = RankedTensorType::get({typeOf(v).getDimSize(1), typeOf(v).getDimSize(0)},
                                     typeOf(v).getElementType());
      auto tr = TransposeOp::create(b_, loc_, t, v, b_.getDenseI64ArrayAttr({1, 0}));
      FailureOr<SmallVector<DenseElementsAttr>> folded =
          evaluateOnHost(tr, {p.getValue()});
      tr->erase();
      if (failed(folded)) return failure();
      auto np = ParameterOp::create(b_, loc_, (p.getSymName() + ".T").str(), (*folded)[0]);
      np->setAttr("ds.transpose_of", b_.getStringAttr(p.getSymName()));
      return np.getResult();
    }
    return build<TransposeOp>({v}, {arrAttr("permutation", {1, 0})});
  };
  if (transA) {
    DS_TRY(t, transposed(a));
    a = t;
  }
  if (transB) {
    DS_TRY(t, transposed(bm));
    bm = t;
  }
  DS_TRY(y, build<MatmulOp>({a, bm}));
  Type elem = typeOf(y).getElementType();
  if (alpha != 1.0f) {
    DS_TRY(s, build<MulOp>({y, scalar(elem, alpha)}));
    y = s;
  }
  if (Value c = input(n, 2)) {
    if (beta != 1.0f) {
      DS_TRY(s, build<MulOp>({c, scalar(elem, beta)}));
      c = s;
    }
    DS_TRY(s, build<AddOp>({y, c}));
    if (typeOf(s).getShape() != typeOf(y).getShape())
      return nodeError(n) << "C does not broadcast to the [M, N] result";
    y = s;
  }
  setOutput(n, 0, y);
  return success();
}

/// Axes of a Reduce* node: an attribute before opset 18 (13 for
/// ReduceSum), then an input; none means all unless noop_with_empty_axes.
FailureOr<SmallVector<int64_t>> OnnxImporter::reductionAxes(const onnx::NodeProto &n,
                                                            int64_t rank, bool isSum) {
  DS_TRY(noop, intAttr(n, "noop_with_empty_axes", 0));
  bool axesAsInput = (isSum && opset_ >= 13) || opset_ >= 18;
  FailureOr<std::optional<SmallVector<int64_t>>> axesOr =
      axesAsInput ? axesOf(n, 1) : intsAttr(n, "axes");
  if (failed(axesOr)) return failure();
  SmallVector<int64_t> axes;
  if (*axesOr && !(*axesOr)->empty()) {
    axes = **axesOr;
    if (failed(normalizeAxes(n, axes, rank))) return failure();
  } else if (!noop) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  return axes;
}

template <typename OpTy>
FailureOr<Value> OnnxImporter::reduceWith(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return build<OpTy>({x}, {arrAttr("axes", axes), attr("keepdims", b_.getBoolAttr(keepdims))});
}

template <typename OpTy> LogicalResult OnnxImporter::reduce(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(axes, reductionAxes(n, typeOf(x).getRank(), std::is_same_v<OpTy, ReduceSumOp>));
  DS_TRY(y, reduceWith<OpTy>(x, axes, keepdims != 0));
  setOutput(n, 0, y);
  return success();
}

/// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp as
/// compositions of ds ops (log-sum-exp subtracts the maximum first).
LogicalResult OnnxImporter::reduceComposite(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(axes, reductionAxes(n, typeOf(x).getRank(), false));
  const std::string &op = n.op_type();
  Value y;
  if (op == "ReduceL1") {
    DS_TRY(a, buildTyped<AbsOp>(x.getType(), x));
    DS_TRY(r, reduceWith<ReduceSumOp>(a, axes, keepdims));
    y = r;
  } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
    DS_TRY(sq, build<MulOp>({x, x}));
    DS_TRY(r, reduceWith<ReduceSumOp>(sq, axes, keepdims));
    y = r;
    if (op == "ReduceL2") {
      DS_TRY(s, buildTyped<SqrtOp>(r.getType(), r));
      y = s;
    }
  } else if (op == "ReduceLogSum") {
    DS_TRY(r, reduceWith<ReduceSumOp>(x, axes, keepdims));
    DS_TRY(l, buildTyped<LogOp>(r.getType(), r));
    y = l;
  } else { // ReduceLogSumExp
    DS_TRY(m, reduceWith<ReduceMaxOp>(x, axes, true));
    DS_TRY(d, build<SubOp>({x, m}));
    DS_TRY(e, buildTyped<ExpOp>(d.getType(), d));
    DS_TRY(r, reduceWith<ReduceSumOp>(e, axes, keepdims));
    DS_TRY(l, buildTyped<LogOp>(r.getType(), r));
    DS_TRY(mk, reshape(m, typeOf(l).getShape()));
    DS_TRY(sum, build<AddOp>({l, mk}));
    y = sum;
  }
  setOutput(n, 0, y);
  return success();
}

template <typename OpTy> LogicalResult OnnxImporter::softmax(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  DS_TRY(axis, intAttr(n, "axis", opset_ >= 13 ? -1 : 1));
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (opset_ >= 13 || axis == rank - 1) {
    DS_TRY(y, buildTyped<OpTy>(x.getType(), x, {i64Attr("axis", axis)}));
    setOutput(n, 0, y);
    return success();
  }
  // Before opset 13 the input is coerced to 2-D at `axis` and normalized
  // over the whole second dimension.
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape[d];
  DS_TRY(x2, reshape(x, {outer, inner}));
  DS_TRY(y2, buildTyped<OpTy>(x2.getType(), x2, {i64Attr("axis", 1)}));
  DS_TRY(y, reshape(y2, shape));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::layerNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  Value bias = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  ArrayRef<int64_t> norm = typeOf(x).getShape().drop_front(axis);
  // Scale and bias may be given broadcastable; ds wants them exact.
  auto fit = [&](Value v) -> FailureOr<Value> {
    if (typeOf(v).getShape() == norm) return v;
    auto t = RankedTensorType::get(norm, typeOf(v).getElementType());
    return buildTyped<ExpandOp>(t, v);
  };
  DS_TRY(s, fit(scale));
  SmallVector<Value> operands{x, s};
  if (bias) {
    DS_TRY(bb, fit(bias));
    operands.push_back(bb);
  }
  DS_TRY(y, buildTyped<LayerNormOp>(x.getType(), operands,
                                    {i64Attr("axis", axis),
                                     attr("epsilon", b_.getF32FloatAttr(eps))}));
  setOutput(n, 0, y);
  // Mean and InvStdDev (training outputs), computed alongside when asked.
  bool wantMean = n.output_size() > 1 && !n.output(1).empty();
  bool wantInv = n.output_size() > 2 && !n.output(2).empty();
  if (wantMean || wantInv) {
    SmallVector<int64_t> axes;
    for (int64_t d = axis; d < typeOf(x).getRank(); ++d) axes.push_back(d);
    DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
    setOutput(n, 1, mean);
    if (wantInv) {
      DS_TRY(dev, build<SubOp>({x, mean}));
      DS_TRY(sq, build<MulOp>({dev, dev}));
      DS_TRY(var, reduceWith<ReduceMeanOp>(sq, axes, true));
      DS_TRY(ve, build<AddOp>({var, scalar(typeOf(x).getElementType(), eps)}));
      DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
      DS_TRY(inv, buildTyped<ReciprocalOp>(sd.getType(), sd));
      setOutput(n, 2, inv);
    }
  }
  return success();
}

LogicalResult OnnxImporter::reshapeNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(spec, constantInts(n, 1, "shape"));
  DS_TRY(allowzero, intAttr(n, "allowzero", 0));
  ArrayRef<int64_t> in = typeOf(x).getShape();
  SmallVector<int64_t> shape;
  int64_t inferAt = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(spec)) {
    if (d == 0 && !allowzero) {
      if (i >= in.size()) return nodeError(n) << "shape copies dimension " << i << ", which the input lacks";
      d = in[i];
    }
    if (d == -1) {
      if (inferAt >= 0) return nodeError(n) << "shape has more than one -1";
      inferAt = static_cast<int64_t>(i);
      shape.push_back(1);
      continue;
    }
    if (d < 0) return nodeError(n) << "shape has a negative dimension " << d;
    shape.push_back(d);
    if (d != 0 && known > std::numeric_limits<int64_t>::max() / d)
      return nodeError(n) << "shape overflows";
    known *= d;
  }
  int64_t total = typeOf(x).getNumElements();
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return nodeError(n) << "cannot infer the -1 dimension of " << total << " elements";
    shape[inferAt] = total / known;
  }
  DS_TRY(y, reshape(x, shape));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::flatten(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 1));
  int64_t rank = typeOf(x).getRank();
  if (axis < -rank || axis > rank) return nodeError(n) << "axis " << axis << " is out of range";
  if (axis < 0) axis += rank;
  ArrayRef<int64_t> s = typeOf(x).getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= s[d];
  DS_TRY(y, reshape(x, {outer, inner}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::transpose(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(permOpt, intsAttr(n, "perm"));
  SmallVector<int64_t> perm;
  if (permOpt) perm = *permOpt;
  else
    for (int64_t d = typeOf(x).getRank() - 1; d >= 0; --d) perm.push_back(d);
  DS_TRY(y, build<TransposeOp>({x}, {arrAttr("permutation", perm)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::slice(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  ArrayRef<int64_t> in = typeOf(x).getShape();
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (opset_ < 10) {
    // Slice-1: starts/ends/axes are attributes, steps are 1.
    DS_TRY(st, intsAttr(n, "starts"));
    DS_TRY(en, intsAttr(n, "ends"));
    DS_TRY(ax, intsAttr(n, "axes"));
    if (!st || !en) return nodeError(n) << "needs attributes 'starts' and 'ends'";
    starts = *st;
    ends = *en;
    if (ax) axes = *ax;
    else
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    steps.assign(starts.size(), 1);
  } else {
    DS_TRY(st, constantInts(n, 1, "starts"));
    DS_TRY(en, constantInts(n, 2, "ends"));
    starts = st;
    ends = en;
    if (input(n, 3)) {
      DS_TRY(a, constantInts(n, 3, "axes"));
      axes = a;
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (input(n, 4)) {
      DS_TRY(sp, constantInts(n, 4, "steps"));
      steps = sp;
    } else {
      steps.assign(starts.size(), 1);
    }
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return nodeError(n) << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> outStarts(rank, 0), outSteps(rank, 1), shape(in);
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i];
    if (failed(normalizeAxis(n, axis, rank))) return failure();
    if (!seen.insert(axis).second) return nodeError(n) << "axis " << axis << " repeats";
    int64_t dim = in[axis], step = steps[i];
    if (step == 0) return nodeError(n) << "step is zero";
    // ONNX clamping, done in a width that cannot overflow.
    __int128 s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (step > 0) {
      s = std::clamp<__int128>(s, 0, dim);
      e = std::clamp<__int128>(e, 0, dim);
      count = e > s ? static_cast<int64_t>((e - s + step - 1) / step) : 0;
    } else {
      s = std::clamp<__int128>(s, 0, dim - 1);
      e = std::clamp<__int128>(e, -1, dim - 1);
      count = s > e ? static_cast<int64_t>((s - e + (-step) - 1) / (-step)) : 0;
    }
    outStarts[axis] = count > 0 ? static_cast<int64_t>(s) : 0;
    outSteps[axis] = step;
    shape[axis] = count;
  }
  auto t = RankedTensorType::get(shape, typeOf(x).getElementType());
  DS_TRY(y, buildTyped<SliceOp>(t, x, {arrAttr("starts", outStarts), arrAttr("steps", outSteps)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::split(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 0));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  int64_t dim = typeOf(x).getDimSize(axis);
  int64_t outputs = n.output_size();
  SmallVector<int64_t> sizes;
  if (input(n, 1)) {
    DS_TRY(s, constantInts(n, 1, "split"));
    sizes = s;
  } else if (findAttr(n, "split")) {
    DS_TRY(s, intsAttr(n, "split"));
    sizes = *s;
  } else {
    DS_TRY(num, intAttr(n, "num_outputs", outputs));
    if (num <= 0 || num != outputs) return nodeError(n) << "num_outputs disagrees with the outputs";
    int64_t chunk = (dim + num - 1) / num;
    for (int64_t i = 0; i < num; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    return nodeError(n) << "split gives " << sizes.size() << " sizes for " << outputs << " outputs";
  SmallVector<Type> types;
  for (int64_t sz : sizes) {
    SmallVector<int64_t> shape(typeOf(x).getShape());
    shape[axis] = sz;
    types.push_back(RankedTensorType::get(shape, typeOf(x).getElementType()));
  }
  auto op = SplitOp::create(b_, loc_, types, x, b_.getI64IntegerAttr(axis));
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> results(op->getResults());
  if (auto folded = tryFoldWithKernels(op, opts_.foldLimit)) results = *folded;
  for (int64_t i = 0; i < outputs; ++i) setOutput(n, i, results[i]);
  return success();
}

LogicalResult OnnxImporter::concat(const onnx::NodeProto &n) {
  SmallVector<Value> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    DS_TRY(v, required(n, i));
    inputs.push_back(v);
  }
  if (inputs.empty()) return nodeError(n) << "needs at least one input";
  DS_TRY(axis, intAttr(n, "axis"));
  if (failed(normalizeAxis(n, axis, typeOf(inputs[0]).getRank()))) return failure();
  DS_TRY(y, build<ConcatOp>(inputs, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::gather(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(axis, intAttr(n, "axis", 0));
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  DS_TRY(y, build<GatherOp>({data, idx}, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::expand(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(spec, constantInts(n, 1, "shape"));
  for (int64_t d : spec)
    if (d < 0) return nodeError(n) << "shape has a negative dimension";
  // ONNX Expand broadcasts both ways: the result is broadcast(x, shape).
  auto shape = broadcastShapes({typeOf(x).getShape(), spec});
  if (failed(shape)) return nodeError(n) << "input does not broadcast to the given shape";
  DS_TRY(y, buildTyped<ExpandOp>(RankedTensorType::get(*shape, typeOf(x).getElementType()), x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::squeeze(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, axesOf(n, 1));
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> axes;
  if (axesOpt) {
    axes = *axesOpt;
    if (failed(normalizeAxes(n, axes, rank))) return failure();
  } else {
    for (int64_t d = 0; d < rank; ++d)
      if (typeOf(x).getDimSize(d) == 1) axes.push_back(d);
  }
  DS_TRY(y, build<SqueezeOp>({x}, {arrAttr("axes", axes)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::unsqueeze(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, axesOf(n, 1));
  if (!axesOpt) return nodeError(n) << "needs axes";
  SmallVector<int64_t> axes = *axesOpt;
  if (failed(normalizeAxes(n, axes, typeOf(x).getRank() + static_cast<int64_t>(axes.size()))))
    return failure();
  DS_TRY(y, build<UnsqueezeOp>({x}, {arrAttr("axes", axes)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::shape(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  ArrayRef<int64_t> s = typeOf(x).getShape();
  int64_t rank = static_cast<int64_t>(s.size());
  DS_TRY(start, intAttr(n, "start", 0));
  DS_TRY(end, intAttr(n, "end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  setOutput(n, 0, i64Tensor(end > start ? s.slice(start, end - start) : ArrayRef<int64_t>()));
  return success();
}

LogicalResult OnnxImporter::size(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({}, b_.getI64Type()),
                                                  APInt(64, typeOf(x).getNumElements()))));
  return success();
}

LogicalResult OnnxImporter::constantOfShape(const onnx::NodeProto &n) {
  DS_TRY(spec, constantInts(n, 0, "input"));
  for (int64_t d : spec)
    if (d < 0) return nodeError(n) << "shape has a negative dimension";
  Attribute fill = b_.getF32FloatAttr(0.0f);
  Type elem = b_.getF32Type();
  if (const auto *a = findAttr(n, "value")) {
    if (a->type() != onnx::AttributeProto_AttributeType_TENSOR)
      return nodeError(n) << "attribute 'value' must be a tensor";
    FailureOr<TypedAttr> v = tensorAttr(a->t(), loc_);
    if (failed(v)) return failure();
    auto dense = dyn_cast<DenseElementsAttr>(*v);
    if (!dense || dense.getNumElements() != 1)
      return nodeError(n) << "attribute 'value' must hold one element";
    elem = dense.getElementType();
    fill = dense.getSplatValue<Attribute>();
  }
  auto t = RankedTensorType::get(spec, elem);
  setOutput(n, 0, constant(DenseElementsAttr::get(t, fill)));
  return success();
}

LogicalResult OnnxImporter::range(const onnx::NodeProto &n) {
  SmallVector<DenseElementsAttr> c;
  for (int i = 0; i < 3; ++i) {
    DenseElementsAttr a = constantOf(input(n, i));
    if (!a || a.getNumElements() != 1)
      return nodeError(n) << "start, limit and delta must be scalars known at compile time";
    c.push_back(a);
  }
  Type elem = c[0].getElementType();
  auto t = [&](int64_t count) { return RankedTensorType::get({count}, elem); };
  if (isa<FloatType>(elem)) {
    double s = c[0].getSplatValue<APFloat>().convertToDouble(),
           l = c[1].getSplatValue<APFloat>().convertToDouble(),
           d = c[2].getSplatValue<APFloat>().convertToDouble();
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      return nodeError(n) << "delta must be non-zero and the bounds finite";
    double cnt = std::max(std::ceil((l - s) / d), 0.0);
    if (cnt > opts_.foldLimit) return nodeError(n) << "range of " << cnt << " elements is too long";
    SmallVector<Attribute> v;
    for (int64_t i = 0; i < static_cast<int64_t>(cnt); ++i)
      v.push_back(b_.getFloatAttr(elem, s + i * d));
    setOutput(n, 0, constant(DenseElementsAttr::get(t(v.size()), v)));
    return success();
  }
  int64_t s = c[0].getSplatValue<APInt>().getSExtValue(),
          l = c[1].getSplatValue<APInt>().getSExtValue(),
          d = c[2].getSplatValue<APInt>().getSExtValue();
  if (d == 0) return nodeError(n) << "delta must be non-zero";
  __int128 span = static_cast<__int128>(l) - s;
  __int128 cnt = span / d + ((span % d) != 0 && ((span > 0) == (d > 0)) ? 1 : 0);
  if (cnt < 0) cnt = 0;
  if (cnt > opts_.foldLimit) return nodeError(n) << "range is too long to fold";
  SmallVector<Attribute> v;
  for (int64_t i = 0; i < static_cast<int64_t>(cnt); ++i)
    v.push_back(b_.getIntegerAttr(elem, s + i * d));
  setOutput(n, 0, constant(DenseElementsAttr::get(t(v.size()), v)));
  return success();
}

LogicalResult OnnxImporter::clip(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  Value y = x;
  if (opset_ < 11) {
    // Clip-6: min/max attributes, defaulting to the float range.
    Type elem = typeOf(x).getElementType();
    DS_TRY(lo, floatAttr(n, "min", -std::numeric_limits<float>::max()));
    DS_TRY(hi, floatAttr(n, "max", std::numeric_limits<float>::max()));
    DS_TRY(a, build<MaxOp>({y, scalar(elem, lo)}));
    DS_TRY(c, build<MinOp>({a, scalar(elem, hi)}));
    setOutput(n, 0, c);
    return success();
  }
  if (Value lo = input(n, 1)) {
    DS_TRY(t, build<MaxOp>({y, lo}));
    y = t;
  }
  if (Value hi = input(n, 2)) {
    DS_TRY(t, build<MinOp>({y, hi}));
    y = t;
  }
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::leakyRelu(const onnx::NodeProto &n) {
  // max(x, 0) + alpha * min(x, 0): exact on both sides of zero.
  DS_TRY(x, required(n, 0));
  DS_TRY(alpha, floatAttr(n, "alpha", 0.01f));
  Type elem = typeOf(x).getElementType();
  Value zero = scalar(elem, 0.0);
  DS_TRY(pos, build<MaxOp>({x, zero}));
  DS_TRY(neg, build<MinOp>({x, zero}));
  DS_TRY(scaled, build<MulOp>({neg, scalar(elem, alpha)}));
  DS_TRY(y, build<AddOp>({pos, scaled}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::mod(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(c, required(n, 1));
  DS_TRY(fmod, intAttr(n, "fmod", 0));
  bool isFloat = isa<FloatType>(typeOf(a).getElementType());
  // ds.mod is fmod on floats and floored on integers: the two ONNX pairings.
  if (isFloat && !fmod) return nodeError(n) << "floating-point Mod needs fmod=1";
  if (!isFloat && fmod) {
    // C's truncated remainder, a - (a / b) * b: ds.div truncates integers.
    DS_TRY(q, build<DivOp>({a, c}));
    DS_TRY(back, build<MulOp>({q, c}));
    DS_TRY(y, build<SubOp>({a, back}));
    setOutput(n, 0, y);
    return success();
  }
  DS_TRY(y, build<ModOp>({a, c}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::isNan(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  auto t = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
  DS_TRY(y, buildTyped<IsNanOp>(t, x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::isInf(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(neg, intAttr(n, "detect_negative", 1));
  DS_TRY(pos, intAttr(n, "detect_positive", 1));
  auto boolType = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
  DS_TRY(inf, buildTyped<IsInfOp>(boolType, x));
  Value y = inf;
  if (!neg || !pos) {
    Value zero = scalar(typeOf(x).getElementType(), 0.0);
    FailureOr<Value> side = pos ? build<GreaterOp>({x, zero}) : build<LessOp>({x, zero});
    if (failed(side)) return failure();
    DS_TRY(both, build<AndOp>({inf, *side}));
    y = both;
    if (!neg && !pos) y = constant(DenseElementsAttr::get(boolType, false));
  }
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::trilu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(upper, intAttr(n, "upper", 1));
  int64_t k = 0;
  if (input(n, 1)) {
    DS_TRY(kv, constantInts(n, 1, "k"));
    if (kv.size() != 1) return nodeError(n) << "k must be a scalar";
    k = kv[0];
  }
  DS_TRY(y, buildTyped<TriluOp>(x.getType(), x,
                                {attr("upper", b_.getBoolAttr(upper != 0)), i64Attr("k", k)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::cumsum(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axisV, constantInts(n, 1, "axis"));
  if (axisV.size() != 1) return nodeError(n) << "axis must be a scalar";
  int64_t axis = axisV[0];
  if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  DS_TRY(exclusive, intAttr(n, "exclusive", 0));
  DS_TRY(reverse, intAttr(n, "reverse", 0));
  DS_TRY(y, buildTyped<CumSumOp>(x.getType(), x,
                                 {i64Attr("axis", axis),
                                  attr("exclusive", b_.getBoolAttr(exclusive != 0)),
                                  attr("reverse", b_.getBoolAttr(reverse != 0))}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::softmaxCrossEntropyLoss(const onnx::NodeProto &n) {
  DS_TRY(scores, required(n, 0));
  DS_TRY(labels, required(n, 1));
  DS_TRY(reduction, stringAttr(n, "reduction", "mean"));
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nodeError(n) << "unknown reduction '" << reduction << "'";
  int64_t rank = typeOf(scores).getRank();
  if (rank < 2) return nodeError(n) << "scores must have rank >= 2";
  bool wantLogProb = n.output_size() > 1 && !n.output(1).empty();
  Type elem = typeOf(scores).getElementType();
  if (reduction == "mean" && !input(n, 2) && !wantLogProb) {
    // The common case as one fused op (and one fused gradient): classes
    // last, mean over labels not ignored.
    DS_TRY(ignore, intAttr(n, "ignore_index", std::numeric_limits<int64_t>::min()));
    Value logits = scores;
    if (rank > 2) {
      SmallVector<int64_t> perm{0};
      for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
      perm.push_back(1);
      DS_TRY(t, build<TransposeOp>({scores}, {arrAttr("permutation", perm)}));
      logits = t;
    }
    DS_TRY(loss, buildTyped<SoftmaxCrossEntropyOp>(RankedTensorType::get({}, elem),
                                                   ValueRange{logits, labels},
                                                   {i64Attr("ignore_index", ignore)}));
    setOutput(n, 0, loss);
    return success();
  }
  DS_TRY(logProb, buildTyped<LogSoftmaxOp>(scores.getType(), scores, {i64Attr("axis", 1)}));
  DS_TRY(loss, nllLoss(n, logProb, labels, input(n, 2), reduction));
  setOutput(n, 0, loss);
  if (wantLogProb) setOutput(n, 1, logProb);
  return success();
}

template <typename OpTy> LogicalResult OnnxImporter::argReduce(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(last, intAttr(n, "select_last_index", 0));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) shape.push_back(typeOf(x).getDimSize(d));
    else if (keepdims) shape.push_back(1);
  }
  DS_TRY(y, buildTyped<OpTy>(RankedTensorType::get(shape, b_.getI64Type()), x,
                             {i64Attr("axis", axis), attr("keepdims", b_.getBoolAttr(keepdims != 0)),
                              attr("select_last_index", b_.getBoolAttr(last != 0))}));
  setOutput(n, 0, y);
  return success();
}

/// Begin and end pads of a window op: explicit `pads`, or auto_pad's SAME
/// (output = ceil(in / stride), extra pad at the end for SAME_UPPER, at the
/// beginning for SAME_LOWER) or VALID.
FailureOr<SmallVector<int64_t>> OnnxImporter::windowPads(const onnx::NodeProto &n,
                                                         ArrayRef<int64_t> in,
                                                         ArrayRef<int64_t> kernel,
                                                         ArrayRef<int64_t> strides,
                                                         ArrayRef<int64_t> dilations) {
  size_t k = in.size();
  DS_TRY(autoPad, stringAttr(n, "auto_pad", "NOTSET"));
  SmallVector<int64_t> pads(2 * k, 0);
  if (autoPad == "NOTSET") {
    DS_TRY(p, intsAttr(n, "pads"));
    if (p) {
      if (p->size() != 2 * k)
        return FailureOr<SmallVector<int64_t>>(nodeError(n) << "pads needs " << 2 * k << " entries");
      pads = *p;
    }
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t d = 0; d < k; ++d) {
      int64_t out = (in[d] + strides[d] - 1) / strides[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + dilations[d] * (kernel[d] - 1) + 1 - in[d]);
      int64_t small = total / 2, big = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : big;
      pads[d + k] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "VALID") {
    return FailureOr<SmallVector<int64_t>>(nodeError(n) << "unknown auto_pad '" << autoPad << "'");
  }
  return pads;
}

LogicalResult OnnxImporter::conv(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  Value bias = input(n, 2);
  int64_t rank = typeOf(x).getRank();
  if (rank < 3 || typeOf(w).getRank() != rank)
    return nodeError(n) << "input and weight must be [N, C, spatial...] and [M, C/group, k...]";
  size_t k = rank - 2;
  ArrayRef<int64_t> kernel = typeOf(w).getShape().drop_front(2);
  DS_TRY(st, intsAttr(n, "strides"));
  DS_TRY(dl, intsAttr(n, "dilations"));
  DS_TRY(group, intAttr(n, "group", 1));
  SmallVector<int64_t> strides = st ? *st : SmallVector<int64_t>(k, 1);
  SmallVector<int64_t> dilations = dl ? *dl : SmallVector<int64_t>(k, 1);
  if (strides.size() != k || dilations.size() != k)
    return nodeError(n) << "strides and dilations need one entry per spatial dimension";
  DS_TRY(pads, windowPads(n, typeOf(x).getShape().drop_front(2), kernel, strides, dilations));
  SmallVector<int64_t> shape{typeOf(x).getDimSize(0), typeOf(w).getDimSize(0)};
  for (size_t d = 0; d < k; ++d) {
    int64_t span = dilations[d] * (kernel[d] - 1) + 1;
    int64_t padded = typeOf(x).getDimSize(d + 2) + pads[d] + pads[d + k];
    if (strides[d] <= 0 || padded < span) return nodeError(n) << "the kernel does not fit the input";
    shape.push_back((padded - span) / strides[d] + 1);
  }
  SmallVector<Value> operands{x, w};
  if (bias) operands.push_back(bias);
  DS_TRY(y, buildTyped<ConvOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), operands,
                               {arrAttr("strides", strides), arrAttr("dilations", dilations),
                                arrAttr("pads", pads), i64Attr("group", group)}));
  setOutput(n, 0, y);
  return success();
}

// ConvTranspose as the equivalent direct convolution: zeros inserted
// between input elements (stride), the input padded by d(k-1) minus the
// pads (negative amounts crop, output_padding adds at the end), and the
// weight flipped spatially with its channel axes swapped per group. Every
// piece is an op with a kernel and a gradient rule, so it also trains.
LogicalResult OnnxImporter::convTranspose(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  Value bias = input(n, 2);
  int64_t rank = typeOf(x).getRank();
  Type elem = typeOf(x).getElementType();
  if (rank < 3 || typeOf(w).getRank() != rank || !isa<FloatType>(elem))
    return nodeError(n) << "input and weight must be float [N, C, spatial...] and "
                           "[C, M/group, k...]";
  size_t k = rank - 2;
  ArrayRef<int64_t> in = typeOf(x).getShape().drop_front(2);
  ArrayRef<int64_t> kernel = typeOf(w).getShape().drop_front(2);
  DS_TRY(group, intAttr(n, "group", 1));
  int64_t cin = typeOf(x).getDimSize(1);
  if (group <= 0 || cin % group || typeOf(w).getDimSize(0) != cin)
    return nodeError(n) << "weight must have the input's " << cin
                        << " channels first, divisible by group " << group;
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  if (ks && ArrayRef<int64_t>(*ks) != kernel)
    return nodeError(n) << "kernel_shape disagrees with the weight";
  auto perDim = [&](StringRef name, int64_t dflt) -> FailureOr<SmallVector<int64_t>> {
    DS_TRY(v, intsAttr(n, name));
    if (!v) return SmallVector<int64_t>(k, dflt);
    if (v->size() != k)
      return FailureOr<SmallVector<int64_t>>(nodeError(n) << name << " needs one entry per "
                                                             "spatial dimension");
    return *v;
  };
  DS_TRY(strides, perDim("strides", 1));
  DS_TRY(dilations, perDim("dilations", 1));
  DS_TRY(outPad, perDim("output_padding", 0));
  DS_TRY(autoPad, stringAttr(n, "auto_pad", "NOTSET"));
  DS_TRY(padsAttr, intsAttr(n, "pads"));
  DS_TRY(outShape, intsAttr(n, "output_shape"));
  for (size_t d = 0; d < k; ++d)
    if (strides[d] <= 0 || dilations[d] <= 0 || outPad[d] < 0)
      return nodeError(n) << "strides and dilations must be positive, output_padding "
                             "non-negative";
  SmallVector<int64_t> pads(2 * k, 0);
  if (padsAttr) {
    if (padsAttr->size() != 2 * k) return nodeError(n) << "pads needs two entries per spatial dimension";
    pads = *padsAttr;
  }
  if (outShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // The pads are chosen so the output has the requested shape.
    ArrayRef<int64_t> want;
    SmallVector<int64_t> same;
    if (outShape) {
      want = *outShape;
      if (want.size() == k + 2) want = want.drop_front(2);
    } else {
      for (size_t d = 0; d < k; ++d) same.push_back(in[d] * strides[d]);
      want = same;
    }
    if (want.size() != k) return nodeError(n) << "output_shape needs one entry per spatial dimension";
    for (size_t d = 0; d < k; ++d) {
      int64_t total = strides[d] * (in[d] - 1) + outPad[d] + (kernel[d] - 1) * dilations[d] + 1 -
                      want[d];
      if (total < 0) total = 0;  // output_shape larger than the full output: padded at the end
      bool upper = autoPad == "SAME_UPPER";
      pads[d] = upper ? total / 2 : total - total / 2;
      pads[d + k] = total - pads[d];
      if (outShape) outPad[d] += std::max<int64_t>(0, want[d] - (strides[d] * (in[d] - 1) +
                                 outPad[d] + (kernel[d] - 1) * dilations[d] + 1));
    }
  } else if (autoPad != "NOTSET" && autoPad != "VALID") {
    return nodeError(n) << "auto_pad '" << autoPad << "' is not one of NOTSET, SAME_UPPER, "
                           "SAME_LOWER, VALID";
  }
  // Zeros between input elements: [.., L, ..] -> [.., L, 1, ..] ++ zeros
  // [.., L, s-1, ..] -> [.., L*s, ..], keeping the first (L-1)s+1.
  Value z = x;
  for (size_t d = 0; d < k; ++d) {
    int64_t s = strides[d], a = d + 2, len = typeOf(z).getDimSize(a);
    if (s == 1 || len == 0) continue;
    SmallVector<int64_t> split(typeOf(z).getShape());
    split.insert(split.begin() + a + 1, 1);
    DS_TRY(col, reshape(z, split));
    split[a + 1] = s - 1;
    Value zeros = constant(DenseElementsAttr::get(RankedTensorType::get(split, elem),
                                                  b_.getZeroAttr(elem)));
    DS_TRY(wide, build<ConcatOp>({col, zeros}, {i64Attr("axis", a + 1)}));
    SmallVector<int64_t> merged(typeOf(z).getShape());
    merged[a] = len * s;
    DS_TRY(flat, reshape(wide, merged));
    DS_TRY(cut, sliceAxis(flat, a, 0, 1, (len - 1) * s + 1));
    z = cut;
  }
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  for (size_t d = 0; d < k; ++d) {
    int64_t span = dilations[d] * (kernel[d] - 1);
    lo[d + 2] = span - pads[d];
    hi[d + 2] = span - pads[d + k] + outPad[d];
  }
  DS_TRY(padded, padWith(n, z, lo, hi, "constant", b_.getZeroAttr(elem)));
  // Weight [C, M/g, k..] -> flipped -> [g, C/g, M/g, k..] -> [g, M/g, C/g, k..] -> [M, C/g, k..].
  Value wf = w;
  for (size_t d = 0; d < k; ++d) {
    DS_TRY(f, sliceAxis(wf, d + 2, kernel[d] - 1, -1, kernel[d]));
    wf = f;
  }
  int64_t mg = typeOf(w).getDimSize(1);
  SmallVector<int64_t> grouped{group, cin / group, mg};
  llvm::append_range(grouped, kernel);
  DS_TRY(wg, reshape(wf, grouped));
  SmallVector<int64_t> perm{0, 2, 1};
  for (size_t d = 0; d < k; ++d) perm.push_back(3 + d);
  DS_TRY(wt, build<TransposeOp>({wg}, {arrAttr("permutation", perm)}));
  SmallVector<int64_t> convW{group * mg, cin / group};
  llvm::append_range(convW, kernel);
  DS_TRY(wc, reshape(wt, convW));
  SmallVector<int64_t> shape{typeOf(x).getDimSize(0), group * mg};
  for (size_t d = 0; d < k; ++d) {
    int64_t o = typeOf(padded).getDimSize(d + 2) - dilations[d] * (kernel[d] - 1);
    if (o <= 0) return nodeError(n) << "pads leave no output along spatial dimension " << d;
    shape.push_back(o);
  }
  SmallVector<Value> operands{padded, wc};
  if (bias) operands.push_back(bias);
  DS_TRY(y, buildTyped<ConvOp>(RankedTensorType::get(shape, elem), operands,
                               {arrAttr("strides", SmallVector<int64_t>(k, 1)),
                                arrAttr("dilations", dilations),
                                arrAttr("pads", SmallVector<int64_t>(2 * k, 0)),
                                i64Attr("group", group)}));
  setOutput(n, 0, y);
  return success();
}

// DepthToSpace / SpaceToDepth: a reshape, a transpose, a reshape.
LogicalResult OnnxImporter::depthSpace(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(bs, intAttr(n, "blocksize"));
  if (typeOf(x).getRank() != 4) return nodeError(n) << "needs a 4-D [N, C, H, W] input";
  ArrayRef<int64_t> in = typeOf(x).getShape();
  int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  SmallVector<int64_t> split, perm, out;
  if (n.op_type() == "DepthToSpace") {
    DS_TRY(mode, stringAttr(n, "mode", "DCR"));
    if (bs <= 0 || C % (bs * bs))
      return nodeError(n) << "blocksize " << bs << " squared must divide the " << C << " channels";
    int64_t c = C / (bs * bs);
    if (mode == "DCR") {
      split = {N, bs, bs, c, H, W};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      split = {N, c, bs, bs, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      return nodeError(n) << "mode '" << mode << "' is not DCR or CRD";
    }
    out = {N, c, H * bs, W * bs};
  } else {
    if (bs <= 0 || H % bs || W % bs)
      return nodeError(n) << "blocksize " << bs << " must divide height " << H << " and width " << W;
    split = {N, C, H / bs, bs, W / bs, bs};
    perm = {0, 3, 5, 1, 2, 4};
    out = {N, C * bs * bs, H / bs, W / bs};
  }
  DS_TRY(r, reshape(x, split));
  DS_TRY(t, build<TransposeOp>({r}, {arrAttr("permutation", perm)}));
  DS_TRY(y, reshape(t, out));
  setOutput(n, 0, y);
  return success();
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
LogicalResult OnnxImporter::shrink(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(lambd, floatAttr(n, "lambd", 0.5f));
  DS_TRY(bias, floatAttr(n, "bias", 0.0f));
  Type elem = typeOf(x).getElementType();
  DS_TRY(low, build<LessOp>({x, scalar(elem, -lambd)}));
  DS_TRY(high, build<GreaterOp>({x, scalar(elem, lambd)}));
  DS_TRY(up, build<AddOp>({x, scalar(elem, bias)}));
  DS_TRY(down, build<SubOp>({x, scalar(elem, bias)}));
  DS_TRY(hi, build<WhereOp>({high, down, scalar(elem, 0)}));
  DS_TRY(y, build<WhereOp>({low, up, hi}));
  setOutput(n, 0, y);
  return success();
}

// EyeLike: a constant; only the input's shape matters.
LogicalResult OnnxImporter::eyeLike(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  if (typeOf(x).getRank() != 2) return nodeError(n) << "needs a 2-D input";
  DS_TRY(k, intAttr(n, "k", 0));
  Type elem = typeOf(x).getElementType();
  if (findAttr(n, "dtype")) {
    DS_TRY(dt, intAttr(n, "dtype"));
    FailureOr<Type> e = elementType(static_cast<int32_t>(dt));
    if (failed(e)) return nodeError(n) << "dtype " << onnxTypeName(static_cast<int32_t>(dt)) << " is not supported";
    elem = *e;
  }
  int64_t rows = typeOf(x).getDimSize(0), cols = typeOf(x).getDimSize(1);
  auto t = RankedTensorType::get({rows, cols}, elem);
  Attribute one = isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, 1.0))
                                       : Attribute(b_.getIntegerAttr(elem, 1));
  Attribute zero = b_.getZeroAttr(elem);
  SmallVector<Attribute> values;
  values.reserve(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) values.push_back(c - r == k ? one : zero);
  setOutput(n, 0, constant(DenseElementsAttr::get(t, values)));
  return success();
}

/// Index rows [..., k] (possibly negative) into `dims` -> one i64 linear
/// row-major index per row, shape [...].
FailureOr<Value> OnnxImporter::linearIndex(const onnx::NodeProto &n, Value idx0,
                                           ArrayRef<int64_t> dims) {
  ArrayRef<int64_t> is = typeOf(idx0).getShape();
  int64_t k = dims.size();
  SmallVector<int64_t> strides(k, 1);
  for (int64_t i = k - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  DS_TRY(idx, castTo(idx0, b_.getI64Type()));
  DS_TRY(neg, build<LessOp>({idx, scalar(b_.getI64Type(), 0)}));
  DS_TRY(shifted, build<AddOp>({idx, i64Tensor(dims)}));
  DS_TRY(wrapped, build<WhereOp>({neg, shifted, idx}));
  DS_TRY(scaled, build<MulOp>({wrapped, i64Tensor(strides)}));
  return reduceWith<ReduceSumOp>(scaled, {static_cast<int64_t>(is.size()) - 1}, false);
}

// GatherND: each index row becomes one linear index into the data's
// flattened indexed axes (plus its batch's offset with batch_dims), then an
// ordinary Gather, which has a kernel and a gradient rule.
LogicalResult OnnxImporter::gatherND(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(b, intAttr(n, "batch_dims", 0));
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  if (is.empty() || !isa<IntegerType>(typeOf(idx).getElementType()))
    return nodeError(n) << "indices must be an integer tensor of rank >= 1";
  int64_t k = is.back(), rank = ds.size();
  if (b < 0 || b >= static_cast<int64_t>(is.size()) || b >= rank)
    return nodeError(n) << "batch_dims " << b << " must be below the ranks of data and indices";
  for (int64_t d = 0; d < b; ++d)
    if (ds[d] != is[d])
      return nodeError(n) << "batch dimension " << d << " is " << ds[d] << " in data but "
                          << is[d] << " in indices";
  if (k < 1 || b + k > rank)
    return nodeError(n) << "index rows of length " << k << " do not fit data of rank " << rank
                        << " with batch_dims " << b;
  ArrayRef<int64_t> dims = ds.slice(b, k);
  DS_TRY(linear0, linearIndex(n, idx, dims));
  Value linear = linear0;
  int64_t block = 1, batch = 1;
  for (int64_t d : dims) block *= d;
  for (int64_t d : ds.take_front(b)) batch *= d;
  if (b > 0) {
    // Batch i's rows index block i of the flattened data.
    SmallVector<int64_t> offShape(is.drop_back());
    std::fill(offShape.begin() + b, offShape.end(), 1);
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < batch; ++i) offsets.push_back(i * block);
    auto t = RankedTensorType::get(offShape, b_.getI64Type());
    DS_TRY(shifted, build<AddOp>({linear, constant(DenseElementsAttr::get(t, ArrayRef(offsets)))}));
    linear = shifted;
  }
  SmallVector<int64_t> flatShape{batch * block};
  llvm::append_range(flatShape, ds.drop_front(b + k));
  DS_TRY(flat, reshape(data, flatShape));
  DS_TRY(y, build<GatherOp>({flat, linear}, {i64Attr("axis", 0)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::pool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  bool wantIndices = n.output_size() > 1 && !n.output(1).empty();
  int64_t rank = typeOf(x).getRank();
  if (rank < 3) return nodeError(n) << "input must be [N, C, spatial...]";
  size_t k = rank - 2;
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  if (!ks || ks->size() != k) return nodeError(n) << "kernel_shape needs one entry per spatial dimension";
  DS_TRY(st, intsAttr(n, "strides"));
  DS_TRY(dl, intsAttr(n, "dilations"));
  DS_TRY(ceil, intAttr(n, "ceil_mode", 0));
  DS_TRY(includePad, intAttr(n, "count_include_pad", 0));
  SmallVector<int64_t> kernel = *ks;
  SmallVector<int64_t> strides = st ? *st : SmallVector<int64_t>(k, 1);
  SmallVector<int64_t> dilations = dl ? *dl : SmallVector<int64_t>(k, 1);
  if (strides.size() != k || dilations.size() != k)
    return nodeError(n) << "strides and dilations need one entry per spatial dimension";
  ArrayRef<int64_t> in = typeOf(x).getShape().drop_front(2);
  DS_TRY(pads, windowPads(n, in, kernel, strides, dilations));
  SmallVector<int64_t> shape{typeOf(x).getDimSize(0), typeOf(x).getDimSize(1)};
  for (size_t d = 0; d < k; ++d) {
    int64_t span = dilations[d] * (kernel[d] - 1) + 1;
    int64_t room = in[d] + pads[d] + pads[d + k] - span;
    if (strides[d] <= 0 || room < 0) return nodeError(n) << "the window does not fit the input";
    int64_t out = (ceil ? (room + strides[d] - 1) / strides[d] : room / strides[d]) + 1;
    // ceil_mode: the last window must still start inside the input or its
    // begin padding (PyTorch's and onnxruntime's rule).
    if (ceil && (out - 1) * strides[d] >= in[d] + pads[d]) --out;
    shape.push_back(out);
  }
  auto kind = n.op_type() == "MaxPool" ? PoolKind::Max : PoolKind::Avg;
  DS_TRY(y, buildTyped<PoolOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), x,
                               {attr("kind", PoolKindAttr::get(ctx_, kind)),
                                arrAttr("kernel", kernel), arrAttr("strides", strides),
                                arrAttr("dilations", dilations), arrAttr("pads", pads),
                                attr("count_include_pad", b_.getBoolAttr(includePad != 0))}));
  setOutput(n, 0, y);
  if (wantIndices) {
    DS_TRY(order, intAttr(n, "storage_order", 0));
    if (order != 0 && order != 1) return nodeError(n) << "storage_order must be 0 or 1";
    auto t = RankedTensorType::get(shape, b_.getI64Type());
    DS_TRY(idx, buildTyped<MaxPoolIndicesOp>(
                    t, x, {arrAttr("kernel", kernel), arrAttr("strides", strides),
                           arrAttr("dilations", dilations), arrAttr("pads", pads),
                           attr("column_major", b_.getBoolAttr(order == 1))}));
    setOutput(n, 1, idx);
  }
  return success();
}

/// [0, n) laid along `axis` of a rank-`rank` tensor (other dims 1).
Value OnnxImporter::iota(int64_t n, int64_t axis, int64_t rank, Type elem) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<Attribute> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, i))
                                     : Attribute(b_.getIntegerAttr(elem, i)));
  return constant(DenseElementsAttr::get(RankedTensorType::get(shape, elem), v));
}

LogicalResult OnnxImporter::globalPool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  if (rank < 3) return nodeError(n) << "needs an input [N, C, spatial...]";
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  FailureOr<Value> y = n.op_type() == "GlobalAveragePool" ? reduceWith<ReduceMeanOp>(x, axes, true)
                                                          : reduceWith<ReduceMaxOp>(x, axes, true);
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

LogicalResult OnnxImporter::prelu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(slope0, required(n, 1));
  Value slope = slope0;
  // PRelu-6 applies a [C] slope per channel; later opsets broadcast as numpy.
  if (opset_ < 7 && typeOf(x).getRank() > 2 && typeOf(slope).getRank() == 1 &&
      typeOf(slope).getDimSize(0) == typeOf(x).getDimSize(1)) {
    SmallVector<int64_t> shape(typeOf(x).getRank() - 1, 1);
    shape[0] = typeOf(x).getDimSize(1);
    DS_TRY(r, reshape(slope, shape));
    slope = r;
  }
  Value zero = scalar(typeOf(x).getElementType(), 0.0);
  DS_TRY(neg, build<LessOp>({x, zero}));
  DS_TRY(scaled, build<MulOp>({x, slope}));
  DS_TRY(y, build<WhereOp>({neg, scaled, x}));
  if (typeOf(y).getShape() != typeOf(x).getShape())
    return nodeError(n) << "slope must broadcast to the input";
  setOutput(n, 0, y);
  return success();
}

FailureOr<Value> OnnxImporter::sliceAxis(Value x, int64_t axis, int64_t start, int64_t step,
                                         int64_t count) {
  SmallVector<int64_t> shape(typeOf(x).getShape()), starts(shape.size(), 0),
      steps(shape.size(), 1);
  shape[axis] = count;
  starts[axis] = start;
  steps[axis] = step;
  return buildTyped<SliceOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), x,
                             {arrAttr("starts", starts), arrAttr("steps", steps)});
}

/// Pads (positive) or crops (negative) each axis of `x` by lo/hi.
FailureOr<Value> OnnxImporter::padWith(const onnx::NodeProto &n, Value x, ArrayRef<int64_t> lo,
                                       ArrayRef<int64_t> hi, StringRef mode, Attribute fill) {
  Value y = x;
  int64_t rank = typeOf(x).getRank();
  Type elemType = typeOf(x).getElementType();
  for (int64_t a = 0; a < rank; ++a) {
    int64_t dim = typeOf(y).getDimSize(a);
    // Crop first: negative pads remove elements.
    int64_t cropLo = std::max<int64_t>(0, -lo[a]), cropHi = std::max<int64_t>(0, -hi[a]);
    if (cropLo + cropHi > dim)
      return FailureOr<Value>(nodeError(n) << "pads crop " << cropLo + cropHi
                                           << " elements from axis " << a << " of size " << dim);
    if (cropLo || cropHi) {
      DS_TRY(c, sliceAxis(y, a, cropLo, 1, dim - cropLo - cropHi));
      y = c;
      dim -= cropLo + cropHi;
    }
    int64_t before = std::max<int64_t>(0, lo[a]), after = std::max<int64_t>(0, hi[a]);
    if (!before && !after) continue;
    if (mode == "reflect" && (before >= dim || after >= dim))
      return FailureOr<Value>(nodeError(n) << "reflect pads of axis " << a
                                           << " must be smaller than its size " << dim);
    if (mode == "edge" && dim == 0)
      return FailureOr<Value>(nodeError(n) << "edge padding needs a non-empty axis " << a);
    auto block = [&](int64_t count, bool atStart) -> FailureOr<Value> {
      SmallVector<int64_t> shape(typeOf(y).getShape());
      shape[a] = count;
      auto t = RankedTensorType::get(shape, elemType);
      if (mode == "constant") return constant(DenseElementsAttr::get(t, fill));
      if (mode == "reflect")
        return sliceAxis(y, a, atStart ? count : dim - 2, -1, count);
      DS_TRY(border, sliceAxis(y, a, atStart ? 0 : dim - 1, 1, 1));
      if (count == 1) return border;
      return buildTyped<ExpandOp>(t, border);
    };
    SmallVector<Value> parts;
    if (before) {
      DS_TRY(v, block(before, true));
      parts.push_back(v);
    }
    parts.push_back(y);
    if (after) {
      DS_TRY(v, block(after, false));
      parts.push_back(v);
    }
    DS_TRY(cat, build<ConcatOp>(parts, {i64Attr("axis", a)}));
    y = cat;
  }
  return y;
}

// Pad is lowered axis by axis to slices and concatenations: a constant fill
// is a constant block, `edge` repeats the border slice, `reflect` reads a
// reversed slice, negative pads crop. These ops already have kernels and
// gradient rules, so Pad trains with no kernel of its own.
LogicalResult OnnxImporter::pad(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank();
  DS_TRY(mode, stringAttr(n, "mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return nodeError(n) << "mode '" << mode << "' is not supported (constant, edge, reflect are)";
  SmallVector<int64_t> given, axes;
  Attribute fill = b_.getZeroAttr(xt.getElementType());
  if (opset_ < 11) {
    DS_TRY(p, intsAttr(n, "pads"));
    if (!p) return nodeError(n) << "needs attribute 'pads'";
    given = *p;
    DS_TRY(v, floatAttr(n, "value", 0.0f));
    if (!isa<FloatType>(xt.getElementType()))
      return nodeError(n) << "Pad before opset 11 pads float tensors only";
    fill = FloatAttr::get(xt.getElementType(), v);
  } else {
    DS_TRY(p, constantInts(n, 1, "pads"));
    given = p;
    if (input(n, 2)) {
      // A float initializer imports as a parameter; the fill takes its value.
      DenseElementsAttr c = constantOf(input(n, 2));
      if (auto p = input(n, 2).getDefiningOp<ParameterOp>())
        c = dyn_cast<DenseElementsAttr>(p.getValue());
      if (!c || c.getNumElements() != 1 || c.getElementType() != xt.getElementType())
        return nodeError(n) << "constant_value must be one element of the data's type, known "
                               "at compile time";
      fill = *c.getValues<Attribute>().begin();
    }
    if (input(n, 3)) {
      DS_TRY(a, constantInts(n, 3, "axes"));
      axes = a;
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (given.size() != 2 * axes.size())
    return nodeError(n) << "pads has " << given.size() << " entries for " << axes.size()
                        << " axes; it needs two per axis";
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (failed(normalizeAxis(n, a, rank))) return failure();
    if (!seen.insert(a).second) return nodeError(n) << "axis " << a << " repeats";
    lo[a] = given[i];
    hi[a] = given[i + axes.size()];
  }
  DS_TRY(y, padWith(n, x, lo, hi, mode, fill));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::tile(const onnx::NodeProto &n) {
  // tile = reshape(expand(reshape(x, [1, d0, 1, d1, ...]), [r0, d0, r1, d1, ...]))
  DS_TRY(x, required(n, 0));
  DS_TRY(reps, constantInts(n, 1, "repeats"));
  ArrayRef<int64_t> s = typeOf(x).getShape();
  if (reps.size() != s.size()) return nodeError(n) << "repeats must have one entry per dimension";
  SmallVector<int64_t> inter, expanded, out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (reps[d] < 0) return nodeError(n) << "repeats must be non-negative";
    inter.append({1, s[d]});
    expanded.append({reps[d], s[d]});
    out.push_back(reps[d] * s[d]);
  }
  DS_TRY(a, reshape(x, inter));
  DS_TRY(e, buildTyped<ExpandOp>(RankedTensorType::get(expanded, typeOf(x).getElementType()), a));
  DS_TRY(y, reshape(e, out));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::hardmax(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  DS_TRY(axis, intAttr(n, "axis", opset_ >= 13 ? -1 : 1));
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  Value in = x;
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  if (opset_ < 13 && axis != rank - 1) { // coerced to 2-D before opset 13
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape[d];
    DS_TRY(x2, reshape(x, {outer, inner}));
    in = x2;
    axis = 1;
  }
  int64_t r = typeOf(in).getRank();
  SmallVector<int64_t> kept(typeOf(in).getShape());
  kept[axis] = 1;
  DS_TRY(am, buildTyped<ArgMaxOp>(RankedTensorType::get(kept, b_.getI64Type()), in,
                                  {i64Attr("axis", axis)}));
  Value ids = iota(typeOf(in).getDimSize(axis), axis, r, b_.getI64Type());
  DS_TRY(eq, build<EqualOp>({ids, am}));
  DS_TRY(y, buildTyped<CastOp>(RankedTensorType::get(typeOf(eq).getShape(), typeOf(x).getElementType()), eq));
  DS_TRY(out, reshape(y, shape));
  setOutput(n, 0, out);
  return success();
}

LogicalResult OnnxImporter::oneHot(const onnx::NodeProto &n) {
  DS_TRY(idx, required(n, 0));
  // depth may be of any numeric type (ONNX allows float depths).
  DenseElementsAttr depthAttr = constantOf(input(n, 1));
  if (!depthAttr || depthAttr.getNumElements() != 1)
    return nodeError(n) << "depth must be a scalar known at compile time";
  SmallVector<int64_t> depthV{
      isa<FloatType>(depthAttr.getElementType())
          ? static_cast<int64_t>((*depthAttr.getValues<APFloat>().begin()).convertToDouble())
          : (*depthAttr.getValues<APInt>().begin()).getSExtValue()};
  DS_TRY(values, required(n, 2));
  if (depthV[0] <= 0) return nodeError(n) << "depth must be positive";
  if (typeOf(values).getNumElements() != 2) return nodeError(n) << "values must hold [off, on]";
  int64_t depth = depthV[0];
  int64_t outRank = typeOf(idx).getRank() + 1;
  DS_TRY(axis, intAttr(n, "axis", -1));
  if (axis < -outRank || axis >= outRank) return nodeError(n) << "axis " << axis << " is out of range";
  if (axis < 0) axis += outRank;
  // Integer indices, negatives counting from the end.
  Value i64 = idx;
  if (typeOf(idx).getElementType() != b_.getI64Type()) {
    DS_TRY(c, buildTyped<CastOp>(RankedTensorType::get(typeOf(idx).getShape(), b_.getI64Type()), idx));
    i64 = c;
  }
  Value zero = scalar(b_.getI64Type(), 0), dep = scalar(b_.getI64Type(), static_cast<double>(depth));
  DS_TRY(isNeg, build<LessOp>({i64, zero}));
  DS_TRY(wrapped, build<AddOp>({i64, dep}));
  DS_TRY(norm, build<WhereOp>({isNeg, wrapped, i64}));
  DS_TRY(u, build<UnsqueezeOp>({norm}, {arrAttr("axes", {axis})}));
  DS_TRY(eq, build<EqualOp>({u, iota(depth, axis, outRank, b_.getI64Type())}));
  Type vt = typeOf(values).getElementType();
  DS_TRY(off, buildTyped<SliceOp>(RankedTensorType::get({1}, vt), values,
                                  {arrAttr("starts", {0}), arrAttr("steps", {1})}));
  DS_TRY(on, buildTyped<SliceOp>(RankedTensorType::get({1}, vt), values,
                                 {arrAttr("starts", {1}), arrAttr("steps", {1})}));
  DS_TRY(off0, reshape(off, {}));
  DS_TRY(on0, reshape(on, {}));
  DS_TRY(y, build<WhereOp>({eq, on0, off0}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::gatherElements(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(axis, intAttr(n, "axis", 0));
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  auto t = RankedTensorType::get(typeOf(idx).getShape(), typeOf(data).getElementType());
  DS_TRY(y, buildTyped<GatherElementsOp>(t, ValueRange{data, idx}, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

/// NegativeLogLikelihoodLoss over log-probabilities [N, C, d...] and
/// targets [N, d...]: pick each target's log-probability (gather_elements),
/// weight it (class weights, zero where ignored), reduce as asked; "mean"
/// divides by the total weight, as ONNX defines.
FailureOr<Value> OnnxImporter::nllLoss(const onnx::NodeProto &n, Value logProb, Value target,
                                       Value weight, StringRef reduction) {
  RankedTensorType lt = typeOf(logProb), tt = typeOf(target);
  Type elem = lt.getElementType();
  if (lt.getRank() < 2 || tt.getRank() != lt.getRank() - 1)
    return FailureOr<Value>(nodeError(n) << "input must be [N, C, d...] and target [N, d...]");
  Value t = target, maskF;
  if (findAttr(n, "ignore_index")) {
    DS_TRY(ignore, intAttr(n, "ignore_index"));
    Type it = tt.getElementType();
    Value ign = constant(DenseElementsAttr::get(RankedTensorType::get({}, it),
                                                b_.getIntegerAttr(it, ignore)));
    DS_TRY(eq, build<EqualOp>({target, ign}));
    DS_TRY(keep, buildTyped<NotOp>(eq.getType(), eq));
    Value zero = constant(DenseElementsAttr::get(RankedTensorType::get({}, it),
                                                 b_.getIntegerAttr(it, 0)));
    DS_TRY(safe, build<WhereOp>({keep, target, zero}));
    t = safe;
    DS_TRY(mf, buildTyped<CastOp>(RankedTensorType::get(tt.getShape(), elem), keep));
    maskF = mf;
  }
  DS_TRY(tu, build<UnsqueezeOp>({t}, {arrAttr("axes", {1})}));
  auto pickedType = RankedTensorType::get(typeOf(tu).getShape(), elem);
  DS_TRY(picked, buildTyped<GatherElementsOp>(pickedType, ValueRange{logProb, tu},
                                              {i64Attr("axis", 1)}));
  DS_TRY(flat, reshape(picked, tt.getShape()));
  DS_TRY(loss, buildTyped<NegOp>(flat.getType(), flat));
  Value w = maskF;
  if (weight) {
    DS_TRY(wg, build<GatherOp>({weight, t}, {i64Attr("axis", 0)}));
    w = wg;
    if (maskF) {
      DS_TRY(wm, build<MulOp>({wg, maskF}));
      w = wm;
    }
  }
  Value weighted = loss;
  if (w) {
    DS_TRY(lw, build<MulOp>({loss, w}));
    weighted = lw;
  }
  if (reduction == "none") return weighted;
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < tt.getRank(); ++d) all.push_back(d);
  DS_TRY(sum, reduceWith<ReduceSumOp>(weighted, all, false));
  if (reduction == "sum") return sum;
  if (!w) return reduceWith<ReduceMeanOp>(weighted, all, false);
  DS_TRY(total, reduceWith<ReduceSumOp>(w, all, false));
  return build<DivOp>({sum, total});
}

LogicalResult OnnxImporter::nllLossNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(target, required(n, 1));
  DS_TRY(reduction, stringAttr(n, "reduction", "mean"));
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nodeError(n) << "unknown reduction '" << reduction << "'";
  DS_TRY(loss, nllLoss(n, x, target, input(n, 2), reduction));
  setOutput(n, 0, loss);
  return success();
}

/// Activations ONNX defines by formula, imported as those formulas.
LogicalResult OnnxImporter::activation(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  const std::string &op = n.op_type();
  Type elem = typeOf(x).getElementType();
  Type t = x.getType();
  Value zero = scalar(elem, 0.0), one = scalar(elem, 1.0);
  auto expm1Scaled = [&](double alpha, double inScale) -> FailureOr<Value> {
    // alpha * (exp(x * inScale) - 1)
    Value in = x;
    if (inScale != 1.0) {
      DS_TRY(s, build<MulOp>({x, scalar(elem, inScale)}));
      in = s;
    }
    DS_TRY(e, buildTyped<ExpOp>(t, in));
    DS_TRY(em1, build<SubOp>({e, one}));
    return build<MulOp>({em1, scalar(elem, alpha)});
  };
  auto hardSigmoid = [&](double alpha, double beta) -> FailureOr<Value> {
    DS_TRY(ax, build<MulOp>({x, scalar(elem, alpha)}));
    DS_TRY(axb, build<AddOp>({ax, scalar(elem, beta)}));
    DS_TRY(lo, build<MaxOp>({axb, zero}));
    return build<MinOp>({lo, one});
  };
  FailureOr<Value> y = failure();
  if (op == "Elu" || op == "Selu") {
    DS_TRY(alpha, floatAttr(n, "alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f));
    DS_TRY(neg, expm1Scaled(alpha, 1.0));
    DS_TRY(pos, build<GreaterOp>({x, zero}));
    DS_TRY(w, build<WhereOp>({pos, x, neg}));
    y = w;
    if (op == "Selu") {
      DS_TRY(gamma, floatAttr(n, "gamma", 1.05070102214813232421875f));
      y = build<MulOp>({w, scalar(elem, gamma)});
    }
  } else if (op == "Celu") {
    DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
    DS_TRY(neg, expm1Scaled(alpha, 1.0 / alpha));
    DS_TRY(lo, build<MinOp>({neg, zero}));
    DS_TRY(hi, build<MaxOp>({x, zero}));
    y = build<AddOp>({hi, lo});
  } else if (op == "HardSigmoid") {
    DS_TRY(alpha, floatAttr(n, "alpha", 0.2f));
    DS_TRY(beta, floatAttr(n, "beta", 0.5f));
    y = hardSigmoid(alpha, beta);
  } else if (op == "HardSwish") {
    DS_TRY(hs, hardSigmoid(1.0 / 6.0, 0.5));
    y = build<MulOp>({x, hs});
  } else if (op == "Softsign") {
    DS_TRY(a, buildTyped<AbsOp>(t, x));
    DS_TRY(d, build<AddOp>({a, one}));
    y = build<DivOp>({x, d});
  } else { // ThresholdedRelu
    DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
    DS_TRY(above, build<GreaterOp>({x, scalar(elem, alpha)}));
    y = build<WhereOp>({above, x, zero});
  }
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

/// Inference BatchNormalization: (x - mean) / sqrt(var + eps) * scale + B,
/// the per-channel vectors broadcast along axis 1.
/// A per-channel [C] tensor reshaped to [C, 1, ...] so it broadcasts over
/// an [N, C, d...] input.
FailureOr<Value> OnnxImporter::perChannel(const onnx::NodeProto &n, Value v, Value x) {
  int64_t c = typeOf(x).getDimSize(1);
  if (typeOf(v).getNumElements() != c)
    return FailureOr<Value>(nodeError(n) << "per-channel inputs must have " << c << " elements");
  SmallVector<int64_t> shape(typeOf(x).getRank() - 1, 1);
  shape[0] = c;
  return reshape(v, shape);
}

// InstanceNormalization: statistics per (n, c) over the spatial axes,
// composed from reductions, so it runs and differentiates with no kernel
// of its own.
LogicalResult OnnxImporter::instanceNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(bias, required(n, 2));
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  int64_t rank = typeOf(x).getRank();
  Type elem = typeOf(x).getElementType();
  if (rank < 3 || !isa<FloatType>(elem))
    return nodeError(n) << "needs a floating-point input of rank >= 3";
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  DS_TRY(s, perChannel(n, scale, x));
  DS_TRY(b, perChannel(n, bias, x));
  DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
  DS_TRY(dev, build<SubOp>({x, mean}));
  DS_TRY(sq, build<MulOp>({dev, dev}));
  DS_TRY(var, reduceWith<ReduceMeanOp>(sq, axes, true));
  DS_TRY(ve, build<AddOp>({var, scalar(elem, eps)}));
  DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
  DS_TRY(nrm, build<DivOp>({dev, sd}));
  DS_TRY(sc, build<MulOp>({nrm, s}));
  DS_TRY(y, build<AddOp>({sc, b}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::batchNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(bias, required(n, 2));
  DS_TRY(mean, required(n, 3));
  DS_TRY(var, required(n, 4));
  DS_TRY(training, intAttr(n, "training_mode", 0));
  DS_TRY(isTest, intAttr(n, "is_test", 0));
  DS_TRY(spatial, intAttr(n, "spatial", 1));
  if (opset_ < 7 && !isTest) training = 1;
  if (!spatial) return nodeError(n) << "BatchNormalization with spatial = 0 is not supported";
  if (training || (n.output_size() > 1 && !n.output(1).empty()))
    return nodeError(n) << "training-mode BatchNormalization is not supported";
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  int64_t rank = typeOf(x).getRank();
  if (rank < 2) return nodeError(n) << "needs an input of rank >= 2";
  auto channel = [&](Value v) { return perChannel(n, v, x); };
  DS_TRY(m, channel(mean));
  DS_TRY(v, channel(var));
  DS_TRY(s, channel(scale));
  DS_TRY(b, channel(bias));
  Type elem = typeOf(x).getElementType();
  DS_TRY(ve, build<AddOp>({v, scalar(elem, eps)}));
  DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
  DS_TRY(d, build<SubOp>({x, m}));
  DS_TRY(nrm, build<DivOp>({d, sd}));
  DS_TRY(sc, build<MulOp>({nrm, s}));
  DS_TRY(y, build<AddOp>({sc, b}));
  setOutput(n, 0, y);
  return success();
}

// ---- scatter, top-k, einsum ---------------------------------------------------------

// ScatterElements (and its opset 9-10 name, Scatter): one ds op.
LogicalResult OnnxImporter::scatterElements(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(upd, required(n, 2));
  DS_TRY(axis, intAttr(n, "axis", 0));
  DS_TRY(reduction, stringAttr(n, "reduction", "none"));
  auto red = symbolizeScatterReduction(reduction);
  if (!red)
    return nodeError(n) << "reduction '" << reduction << "' is not none, add, mul, max or min";
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  DS_TRY(y, buildTyped<ScatterElementsOp>(
                typeOf(data), ValueRange{data, idx, upd},
                {i64Attr("axis", axis), attr("reduction", ScatterReductionAttr::get(ctx_, *red))}));
  setOutput(n, 0, y);
  return success();
}

// ScatterND: data viewed as [rows, slice], each index row a linear row
// number, then scatter_elements along axis 0 with the index repeated
// across the slice.
LogicalResult OnnxImporter::scatterND(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(upd, required(n, 2));
  DS_TRY(reduction, stringAttr(n, "reduction", "none"));
  auto red = symbolizeScatterReduction(reduction);
  if (!red)
    return nodeError(n) << "reduction '" << reduction << "' is not none, add, mul, max or min";
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  if (is.empty() || !isa<IntegerType>(typeOf(idx).getElementType()))
    return nodeError(n) << "indices must be an integer tensor of rank >= 1";
  int64_t k = is.back(), rank = ds.size();
  if (k < 1 || k > rank)
    return nodeError(n) << "index rows of length " << k << " do not fit data of rank " << rank;
  SmallVector<int64_t> updShape(is.drop_back());
  llvm::append_range(updShape, ds.drop_front(k));
  if (typeOf(upd).getShape() != ArrayRef<int64_t>(updShape)) {
    std::string want;
    llvm::raw_string_ostream os(want);
    llvm::interleave(updShape, os, "x");
    return nodeError(n) << "updates must have shape " << want;
  }
  int64_t rows = 1, slice = 1, count = 1;
  for (int64_t d : ds.take_front(k)) rows *= d;
  for (int64_t d : ds.drop_front(k)) slice *= d;
  for (int64_t d : is.drop_back()) count *= d;
  DS_TRY(linear, linearIndex(n, idx, ds.take_front(k)));
  DS_TRY(column, reshape(linear, {count, 1}));
  DS_TRY(spread, buildTyped<ExpandOp>(RankedTensorType::get({count, slice}, b_.getI64Type()),
                                      column));
  DS_TRY(data2, reshape(data, {rows, slice}));
  DS_TRY(upd2, reshape(upd, {count, slice}));
  DS_TRY(s, buildTyped<ScatterElementsOp>(
                typeOf(data2), ValueRange{data2, spread, upd2},
                {i64Attr("axis", 0), attr("reduction", ScatterReductionAttr::get(ctx_, *red))}));
  DS_TRY(y, reshape(s, ds));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::topK(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(largest, intAttr(n, "largest", 1));
  int64_t k;
  if (opset_ < 10) {
    DS_TRY(kAttr, intAttr(n, "k"));
    k = kAttr;
  } else {
    DS_TRY(kv, constantInts(n, 1, "K"));
    if (kv.size() != 1) return nodeError(n) << "K must hold one value";
    k = kv[0];
  }
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (k < 0 || k > typeOf(x).getDimSize(axis))
    return nodeError(n) << "K = " << k << " is outside [0, " << typeOf(x).getDimSize(axis)
                        << "] for axis " << axis;
  SmallVector<int64_t> shape(typeOf(x).getShape());
  shape[axis] = k;
  Type types[] = {RankedTensorType::get(shape, typeOf(x).getElementType()),
                  RankedTensorType::get(shape, b_.getI64Type())};
  DS_TRY(r, buildAll<TopKOp>(types, x,
                             {i64Attr("k", k), i64Attr("axis", axis),
                              attr("largest", b_.getBoolAttr(largest != 0))}));
  setOutput(n, 0, r[0]);
  setOutput(n, 1, r[1]);
  return success();
}

namespace {
/// One einsum operand (or partial product): a value and a label per axis.
struct EinsumTerm {
  Value v;
  std::string labels;
};
} // namespace

// Einsum: diagonals (mask and sum), labels summed early where nothing else
// needs them, then a batched matmul per pair of operands ([batch, left,
// contracted] x [batch, contracted, right]) and a final transpose. Every
// step is an existing ds op, so Einsum runs and differentiates without a
// kernel of its own. "..." becomes labels \x01, \x02, ... (right-aligned).
LogicalResult OnnxImporter::einsum(const onnx::NodeProto &n) {
  DS_TRY(eq0, stringAttr(n, "equation", ""));
  std::string eq;
  for (char ch : eq0)
    if (ch != ' ') eq.push_back(ch);
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs = arrow == std::string::npos ? "" : eq.substr(arrow + 2);
  SmallVector<std::string> specs;
  for (StringRef part : llvm::split(StringRef(lhs), ',')) specs.push_back(part.str());
  if (static_cast<int>(specs.size()) != n.input_size())
    return nodeError(n) << "equation '" << eq0 << "' names " << specs.size()
                        << " operands, the node has " << n.input_size();
  int64_t ellipsisRank = 0;
  SmallVector<EinsumTerm> terms;
  // Expands "..." to `count` labels; checks the rest are letters.
  auto expand = [&](const std::string &spec, int64_t count, std::string &out) -> LogicalResult {
    size_t dots = spec.find("...");
    for (size_t i = 0; i < spec.size(); ++i) {
      if (i == dots) {
        for (int64_t e = ellipsisRank - count; e < ellipsisRank; ++e) out.push_back(char(1 + e));
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(spec[i]))) {
        out.push_back(spec[i]);
      } else {
        return nodeError(n) << "equation '" << eq0 << "' has an invalid character '" << spec[i]
                            << "'";
      }
    }
    return success();
  };
  for (auto [i, spec] : llvm::enumerate(specs)) {
    DS_TRY(v, required(n, i));
    int64_t letters = 0;
    for (char ch : spec) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    int64_t rank = typeOf(v).getRank();
    bool dots = spec.find("...") != std::string::npos;
    if (dots ? letters > rank : letters != rank)
      return nodeError(n) << "operand " << i << " has rank " << rank << " but its subscripts '"
                          << spec << "' name " << letters << " axes";
    if (dots) ellipsisRank = std::max(ellipsisRank, rank - letters);
    terms.push_back({v, ""});
  }
  for (auto [i, spec] : llvm::enumerate(specs)) {
    int64_t letters = 0;
    for (char ch : spec) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    if (failed(expand(spec, typeOf(terms[i].v).getRank() - letters, terms[i].labels)))
      return failure();
  }
  std::string out;
  if (arrow != std::string::npos) {
    if (failed(expand(rhs, ellipsisRank, out))) return failure();
  } else {
    // Implicit output: the ellipsis, then letters used once, alphabetically.
    for (int64_t e = 0; e < ellipsisRank; ++e) out.push_back(char(1 + e));
    std::map<char, int> uses;
    for (auto &t : terms)
      for (char ch : t.labels)
        if (std::isalpha(static_cast<unsigned char>(ch))) ++uses[ch];
    for (auto [ch, count] : uses)
      if (count == 1) out.push_back(ch);
  }
  std::map<char, int64_t> size;
  for (auto &t : terms)
    for (auto [i, ch] : llvm::enumerate(t.labels)) {
      int64_t d = typeOf(t.v).getDimSize(i);
      auto [it, fresh] = size.insert({ch, d});
      if (!fresh && it->second != d && it->second != 1 && d != 1)
        return nodeError(n) << "subscript '" << (ch < 32 ? std::string("...") : std::string(1, ch))
                            << "' is " << it->second << " in one operand and " << d
                            << " in another";
      if (!fresh && it->second == 1) it->second = d;
    }
  for (char ch : out)
    if (!size.count(ch))
      return nodeError(n) << "output subscript '" << ch << "' appears in no operand";

  auto permute = [&](EinsumTerm &t, const std::string &order) -> LogicalResult {
    if (t.labels == order) return success();
    SmallVector<int64_t> perm;
    for (char ch : order) perm.push_back(t.labels.find(ch));
    auto r = build<TransposeOp>({t.v}, {arrAttr("permutation", perm)});
    if (failed(r)) return failure();
    t = {*r, order};
    return success();
  };
  // Sums the axes whose labels `keep` rejects.
  auto sumOut = [&](EinsumTerm &t, llvm::function_ref<bool(char)> keep) -> LogicalResult {
    SmallVector<int64_t> axes;
    std::string rest;
    for (auto [i, ch] : llvm::enumerate(t.labels)) {
      if (keep(ch)) rest.push_back(ch);
      else axes.push_back(i);
    }
    if (axes.empty()) return success();
    auto r = reduceWith<ReduceSumOp>(t.v, axes, false);
    if (failed(r)) return failure();
    t = {*r, rest};
    return success();
  };
  auto usedAfter = [&](size_t from, char ch) {
    if (out.find(ch) != std::string::npos) return true;
    for (size_t j = from; j < terms.size(); ++j)
      if (terms[j].labels.find(ch) != std::string::npos) return true;
    return false;
  };

  // Diagonals: a repeated label keeps only the elements where its axes agree.
  for (auto &t : terms) {
    for (size_t i = 0; i < t.labels.size(); ++i) {
      size_t j = t.labels.find(t.labels[i], i + 1);
      if (j == std::string::npos) continue;
      RankedTensorType tt = typeOf(t.v);
      int64_t d = tt.getDimSize(i);
      if (tt.getDimSize(j) != d)
        return nodeError(n) << "repeated subscript '" << t.labels[i] << "' spans axes of "
                            << d << " and " << tt.getDimSize(j);
      SmallVector<int64_t> maskShape(tt.getRank(), 1);
      maskShape[i] = maskShape[j] = d;
      Type elem = tt.getElementType();
      SmallVector<Attribute> eye;
      for (int64_t r = 0; r < d; ++r)
        for (int64_t c = 0; c < d; ++c)
          eye.push_back(isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, r == c))
                                             : Attribute(b_.getIntegerAttr(elem, r == c)));
      Value mask = constant(DenseElementsAttr::get(RankedTensorType::get(maskShape, elem), eye));
      DS_TRY(masked, build<MulOp>({t.v, mask}));
      DS_TRY(summed, reduceWith<ReduceSumOp>(masked, {static_cast<int64_t>(j)}, false));
      t.v = summed;
      t.labels.erase(j, 1);
      --i; // the same label may repeat again
    }
  }
  EinsumTerm acc = terms[0];
  if (failed(sumOut(acc, [&](char ch) { return usedAfter(1, ch); }))) return failure();
  for (size_t ti = 1; ti < terms.size(); ++ti) {
    EinsumTerm rhsTerm = terms[ti];
    auto keepLater = [&](char ch) { return usedAfter(ti + 1, ch); };
    auto inOther = [](const EinsumTerm &o, char ch) { return o.labels.find(ch) != std::string::npos; };
    if (failed(sumOut(rhsTerm, [&](char ch) { return keepLater(ch) || inOther(acc, ch); })))
      return failure();
    std::string batch, left, contracted, right;
    for (char ch : acc.labels) {
      if (!inOther(rhsTerm, ch)) left.push_back(ch);
      else if (keepLater(ch)) batch.push_back(ch);
      else contracted.push_back(ch);
    }
    for (char ch : rhsTerm.labels)
      if (!inOther(acc, ch)) right.push_back(ch);
    if (failed(permute(acc, batch + left + contracted)) ||
        failed(permute(rhsTerm, batch + contracted + right)))
      return failure();
    auto prod = [&](const std::string &ls) {
      int64_t p = 1;
      for (char ch : ls) p *= size[ch];
      return p;
    };
    // Broadcast batch axes of extent 1 (from "...") to the full extent.
    auto widen = [&](EinsumTerm &t) -> LogicalResult {
      SmallVector<int64_t> shape;
      for (auto [i, ch] : llvm::enumerate(t.labels))
        shape.push_back(i < batch.size() ? size[ch] : typeOf(t.v).getDimSize(i));
      if (ArrayRef<int64_t>(shape) == typeOf(t.v).getShape()) return success();
      auto r = buildTyped<ExpandOp>(RankedTensorType::get(shape, typeOf(t.v).getElementType()), t.v);
      if (failed(r)) return failure();
      t.v = *r;
      return success();
    };
    if (failed(widen(acc)) || failed(widen(rhsTerm))) return failure();
    int64_t B = prod(batch), L = prod(left), C = prod(contracted), R = prod(right);
    DS_TRY(a3, reshape(acc.v, {B, L, C}));
    DS_TRY(b3, reshape(rhsTerm.v, {B, C, R}));
    DS_TRY(m, build<MatmulOp>({a3, b3}));
    SmallVector<int64_t> shape;
    std::string labels = batch + left + right;
    for (char ch : labels) shape.push_back(size[ch]);
    DS_TRY(r, reshape(m, shape));
    acc = {r, labels};
  }
  if (failed(sumOut(acc, [&](char ch) { return out.find(ch) != std::string::npos; })) ||
      failed(permute(acc, out)))
    return failure();
  setOutput(n, 0, acc.v);
  return success();
}

// ---- quantization: compositions of round, clip, cast and integer matmul --------------

/// A per-axis (1-D) scale or zero point laid along `axis` of x; scalars and
/// one-element tensors broadcast as they are.
FailureOr<Value> OnnxImporter::alongAxis(const onnx::NodeProto &n, Value v, Value x,
                                         int64_t axis) {
  RankedTensorType vt = typeOf(v);
  if (vt.getRank() == 0 || vt.getNumElements() == 1) return v;
  int64_t rank = typeOf(x).getRank();
  if (vt.getRank() != 1 || failed(normalizeAxis(n, axis, rank)) ||
      vt.getDimSize(0) != typeOf(x).getDimSize(axis))
    return FailureOr<Value>(nodeError(n) << "per-axis scales and zero points must be 1-D with "
                                         << "one entry per element of the axis");
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = vt.getDimSize(0);
  return reshape(v, shape);
}

/// round-half-even(y) + zero point, saturated to qType (ONNX's QuantizeLinear
/// after the division by the scale).
FailureOr<Value> OnnxImporter::quantize(const onnx::NodeProto &n, Value y, Value zeroPoint,
                                        Type qType) {
  auto it = dyn_cast<IntegerType>(qType);
  if (!it || it.getWidth() == 1 || it.getWidth() > 16)
    return FailureOr<Value>(nodeError(n) << "quantizes to " << qType
                                         << "; 8- and 16-bit integers are supported");
  Type f = typeOf(y).getElementType();
  DS_TRY(rounded, build<RoundOp>({y}));
  Value q = rounded;
  if (zeroPoint) {
    DS_TRY(zp, castTo(zeroPoint, f));
    DS_TRY(shifted, build<AddOp>({q, zp}));
    q = shifted;
  }
  unsigned bits = it.getWidth();
  double lo = it.isUnsigned() ? 0 : -std::ldexp(1.0, bits - 1);
  double hi = it.isUnsigned() ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  DS_TRY(above, build<MaxOp>({q, scalar(f, lo)}));
  DS_TRY(clipped, build<MinOp>({above, scalar(f, hi)}));
  return castTo(clipped, qType);
}

LogicalResult OnnxImporter::quantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x0, required(n, 0));
  DS_TRY(scale0, required(n, 1));
  Value zp0 = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", 1));
  DS_TRY(block, intAttr(n, "block_size", 0));
  DS_TRY(saturate, intAttr(n, "saturate", 1));
  if (block != 0) return nodeError(n) << "blocked quantization (block_size) is not supported";
  (void)saturate; // only meaningful for float8 outputs, which ds rejects below
  Type qType = zp0 ? typeOf(zp0).getElementType() : b_.getIntegerType(8, false);
  DS_TRY(outType, intAttr(n, "output_dtype", 0));
  if (outType != 0) {
    FailureOr<Type> t = elementType(static_cast<int32_t>(outType));
    if (failed(t)) return nodeError(n) << "output_dtype " << outType << " is not supported";
    qType = *t;
  }
  Type f = typeOf(scale0).getElementType();
  DS_TRY(x, castTo(x0, f));
  DS_TRY(scale, alongAxis(n, scale0, x, axis));
  Value zp;
  if (zp0) {
    DS_TRY(z, alongAxis(n, zp0, x, axis));
    zp = z;
  }
  DS_TRY(scaled, build<DivOp>({x, scale}));
  DS_TRY(y, quantize(n, scaled, zp, qType));
  setOutput(n, 0, y);
  return success();
}

LogicalResult OnnxImporter::dequantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x0, required(n, 0));
  DS_TRY(scale0, required(n, 1));
  Value zp0 = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", 1));
  DS_TRY(block, intAttr(n, "block_size", 0));
  if (block != 0) return nodeError(n) << "blocked quantization (block_size) is not supported";
  Type f = typeOf(scale0).getElementType();
  DS_TRY(x, castTo(x0, f));
  DS_TRY(scale, alongAxis(n, scale0, x, axis));
  Value centeredX = x;
  if (zp0) {
    DS_TRY(z, alongAxis(n, zp0, x, axis));
    DS_TRY(zf, castTo(z, f));
    DS_TRY(c, build<SubOp>({x, zf}));
    centeredX = c;
  }
  DS_TRY(y, build<MulOp>({centeredX, scale}));
  setOutput(n, 0, y);
  return success();
}

// DynamicQuantizeLinear: uint8 with a scale and zero point that make the
// data's range, widened to include 0, span [0, 255].
LogicalResult OnnxImporter::dynamicQuantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  Type f = typeOf(x).getElementType();
  if (!f.isF32()) return nodeError(n) << "input must be f32";
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < typeOf(x).getRank(); ++d) all.push_back(d);
  Value zero = scalar(f, 0.0);
  DS_TRY(mn0, reduceWith<ReduceMinOp>(x, all, false));
  DS_TRY(mx0, reduceWith<ReduceMaxOp>(x, all, false));
  DS_TRY(mn, build<MinOp>({mn0, zero}));
  DS_TRY(mx, build<MaxOp>({mx0, zero}));
  DS_TRY(range, build<SubOp>({mx, mn}));
  DS_TRY(scale, build<DivOp>({range, scalar(f, 255.0)}));
  DS_TRY(minOverScale, build<DivOp>({mn, scale}));
  DS_TRY(negated, build<SubOp>({zero, minOverScale}));
  Type u8 = b_.getIntegerType(8, false);
  DS_TRY(zp, quantize(n, negated, nullptr, u8));
  DS_TRY(scaled, build<DivOp>({x, scale}));
  DS_TRY(y, quantize(n, scaled, zp, u8));
  setOutput(n, 0, y);
  setOutput(n, 1, scale);
  setOutput(n, 2, zp);
  return success();
}

/// x - zero point, widened to i32 (the integer GEMM's accumulator type). A
/// 1-D zero point of the left operand is per row (`rowwise`).
FailureOr<Value> OnnxImporter::centered(const onnx::NodeProto &n, Value x, Value zeroPoint,
                                        bool rowwise) {
  Type elem = typeOf(x).getElementType();
  auto it = dyn_cast<IntegerType>(elem);
  if (!it || it.getWidth() != 8)
    return FailureOr<Value>(nodeError(n) << "integer matmul operands must be int8 or uint8, not "
                                         << elem);
  DS_TRY(wide, castTo(x, b_.getI32Type()));
  if (!zeroPoint) return wide;
  if (typeOf(zeroPoint).getElementType() != elem)
    return FailureOr<Value>(nodeError(n) << "zero points must have their operand's type");
  DS_TRY(zp0, castTo(zeroPoint, b_.getI32Type()));
  Value zp = zp0;
  if (rowwise && typeOf(zp).getRank() == 1 && typeOf(zp).getNumElements() > 1) {
    DS_TRY(col, reshape(zp, {typeOf(zp).getNumElements(), 1}));
    zp = col;
  }
  return build<SubOp>({wide, zp});
}

LogicalResult OnnxImporter::matmulInteger(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(bm, required(n, 1));
  DS_TRY(ac, centered(n, a, input(n, 2), true));
  DS_TRY(bc, centered(n, bm, input(n, 3), false));
  DS_TRY(y, build<MatmulOp>({ac, bc}));
  setOutput(n, 0, y);
  return success();
}

// QLinearMatMul: the exact integer product of the centered operands, then
// requantized by a_scale * b_scale / y_scale.
LogicalResult OnnxImporter::qlinearMatmul(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(aScale, required(n, 1));
  DS_TRY(bm, required(n, 3));
  DS_TRY(bScale, required(n, 4));
  DS_TRY(yScale, required(n, 6));
  DS_TRY(yZp, required(n, 7));
  DS_TRY(ac, centered(n, a, input(n, 2), true));
  DS_TRY(bc, centered(n, bm, input(n, 5), false));
  DS_TRY(prod, build<MatmulOp>({ac, bc}));
  Type f = typeOf(aScale).getElementType();
  DS_TRY(pf, castTo(prod, f));
  Value as = aScale;
  if (typeOf(as).getRank() == 1 && typeOf(as).getNumElements() > 1) {
    DS_TRY(col, reshape(as, {typeOf(as).getNumElements(), 1}));
    as = col;
  }
  DS_TRY(ab, build<MulOp>({as, bScale}));
  DS_TRY(multiplier, build<DivOp>({ab, yScale}));
  DS_TRY(scaled, build<MulOp>({pf, multiplier}));
  DS_TRY(y, quantize(n, scaled, yZp, typeOf(yZp).getElementType()));
  setOutput(n, 0, y);
  return success();
}

// Hann, Hamming and Blackman windows: the size is known at compile time, so
// the window is a constant (computed in double, stored in the output type).
LogicalResult OnnxImporter::window(const onnx::NodeProto &n) {
  DS_TRY(sizeV, constantInts(n, 0, "size"));
  if (sizeV.size() != 1 || sizeV[0] < 0)
    return nodeError(n) << "size must be one non-negative integer";
  DS_TRY(periodic, intAttr(n, "periodic", 1));
  DS_TRY(dt, intAttr(n, "output_datatype", onnx::TensorProto_DataType_FLOAT));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(dt));
  if (failed(elem)) return nodeError(n) << "output_datatype " << dt << " is not supported";
  int64_t size = sizeV[0];
  double denom = periodic ? size : size - 1;
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < size; ++i) {
    double a = denom > 0 ? 2 * M_PI * i / denom : 0, v;
    if (n.op_type() == "HannWindow") v = 0.5 - 0.5 * std::cos(a);
    else if (n.op_type() == "HammingWindow") v = 25.0 / 46 - (21.0 / 46) * std::cos(a);
    else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    values.push_back(isa<FloatType>(*elem) ? Attribute(b_.getFloatAttr(*elem, v))
                                           : Attribute(b_.getIntegerAttr(*elem, int64_t(v))));
  }
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({size}, *elem), values)));
  return success();
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
// over `axes`, ONNX's function body.
LogicalResult OnnxImporter::meanVarianceNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, intsAttr(n, "axes"));
  SmallVector<int64_t> axes = axesOpt ? *axesOpt : SmallVector<int64_t>{0, 2, 3};
  if (failed(normalizeAxes(n, axes, typeOf(x).getRank()))) return failure();
  Type f = typeOf(x).getElementType();
  DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
  DS_TRY(sq, build<MulOp>({x, x}));
  DS_TRY(meanSq, reduceWith<ReduceMeanOp>(sq, axes, true));
  DS_TRY(sqMean, build<MulOp>({mean, mean}));
  DS_TRY(var, build<SubOp>({meanSq, sqMean}));
  DS_TRY(std, build<SqrtOp>({var}));
  DS_TRY(denom, build<AddOp>({std, scalar(f, 1e-9)}));
  DS_TRY(centered, build<SubOp>({x, mean}));
  DS_TRY(y, build<DivOp>({centered, denom}));
  setOutput(n, 0, y);
  return success();
}

// BitShift on unsigned integers: x * 2^s or x / 2^s, which wrap and
// truncate exactly as the shifts do.
LogicalResult OnnxImporter::bitShift(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(s, required(n, 1));
  DS_TRY(direction, stringAttr(n, "direction", ""));
  if (direction != "LEFT" && direction != "RIGHT")
    return nodeError(n) << "direction must be LEFT or RIGHT, not '" << direction << "'";
  Type elem = typeOf(x).getElementType();
  if (!elem.isUnsignedInteger()) return nodeError(n) << "BitShift needs unsigned integers";
  DS_TRY(factor, build<PowOp>({scalar(elem, 2), s}));
  FailureOr<Value> y = direction == "LEFT" ? build<MulOp>({x, factor}) : build<DivOp>({x, factor});
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

const llvm::StringMap<Handler> &OnnxImporter::handlers() {
  static const llvm::StringMap<Handler> table = {
      {"Identity", &OnnxImporter::identity},
      {"Dropout", &OnnxImporter::dropout},
      {"Constant", &OnnxImporter::constantNode},
      {"Add", &OnnxImporter::binary<AddOp>},
      {"Sub", &OnnxImporter::binary<SubOp>},
      {"Mul", &OnnxImporter::binary<MulOp>},
      {"Div", &OnnxImporter::binary<DivOp>},
      {"Pow", &OnnxImporter::pow},
      {"Equal", &OnnxImporter::binary<EqualOp>},
      {"Less", &OnnxImporter::binary<LessOp>},
      {"Greater", &OnnxImporter::binary<GreaterOp>},
      {"LessOrEqual", &OnnxImporter::binary<LessEqualOp>},
      {"GreaterOrEqual", &OnnxImporter::binary<GreaterEqualOp>},
      {"And", &OnnxImporter::binary<AndOp>},
      {"Or", &OnnxImporter::binary<OrOp>},
      {"Xor", &OnnxImporter::binary<XorOp>},
      {"Min", &OnnxImporter::variadic<MinOp>},
      {"Max", &OnnxImporter::variadic<MaxOp>},
      {"Sum", &OnnxImporter::variadic<AddOp>},
      {"Mean", &OnnxImporter::mean},
      {"Sqrt", &OnnxImporter::unary<SqrtOp>},
      {"Reciprocal", &OnnxImporter::unary<ReciprocalOp>},
      {"Exp", &OnnxImporter::unary<ExpOp>},
      {"Log", &OnnxImporter::unary<LogOp>},
      {"Erf", &OnnxImporter::unary<ErfOp>},
      {"Tanh", &OnnxImporter::unary<TanhOp>},
      {"Sigmoid", &OnnxImporter::unary<SigmoidOp>},
      {"Relu", &OnnxImporter::unary<ReluOp>},
      {"Neg", &OnnxImporter::unary<NegOp>},
      {"Abs", &OnnxImporter::unary<AbsOp>},
      {"Not", &OnnxImporter::unary<NotOp>},
      {"Gelu", &OnnxImporter::gelu},
      {"Sin", &OnnxImporter::unary<SinOp>},
      {"Cos", &OnnxImporter::unary<CosOp>},
      {"Tan", &OnnxImporter::unary<TanOp>},
      {"Asin", &OnnxImporter::unary<AsinOp>},
      {"Acos", &OnnxImporter::unary<AcosOp>},
      {"Atan", &OnnxImporter::unary<AtanOp>},
      {"Sinh", &OnnxImporter::unary<SinhOp>},
      {"Cosh", &OnnxImporter::unary<CoshOp>},
      {"Asinh", &OnnxImporter::unary<AsinhOp>},
      {"Acosh", &OnnxImporter::unary<AcoshOp>},
      {"Atanh", &OnnxImporter::unary<AtanhOp>},
      {"Elu", &OnnxImporter::activation},
      {"Selu", &OnnxImporter::activation},
      {"Celu", &OnnxImporter::activation},
      {"HardSigmoid", &OnnxImporter::activation},
      {"HardSwish", &OnnxImporter::activation},
      {"Softsign", &OnnxImporter::activation},
      {"ThresholdedRelu", &OnnxImporter::activation},
      {"BatchNormalization", &OnnxImporter::batchNorm},
      {"ArgMax", &OnnxImporter::argReduce<ArgMaxOp>},
      {"GatherElements", &OnnxImporter::gatherElements},
      {"Conv", &OnnxImporter::conv},
      {"MaxPool", &OnnxImporter::pool},
      {"AveragePool", &OnnxImporter::pool},
      {"GlobalAveragePool", &OnnxImporter::globalPool},
      {"GlobalMaxPool", &OnnxImporter::globalPool},
      {"PRelu", &OnnxImporter::prelu},
      {"Tile", &OnnxImporter::tile},
      {"Pad", &OnnxImporter::pad},
      {"GatherND", &OnnxImporter::gatherND},
      {"HannWindow", &OnnxImporter::window},
      {"HammingWindow", &OnnxImporter::window},
      {"BlackmanWindow", &OnnxImporter::window},
      {"MeanVarianceNormalization", &OnnxImporter::meanVarianceNorm},
      {"BitShift", &OnnxImporter::bitShift},
      {"ScatterElements", &OnnxImporter::scatterElements},
      {"Scatter", &OnnxImporter::scatterElements},
      {"ScatterND", &OnnxImporter::scatterND},
      {"TopK", &OnnxImporter::topK},
      {"Einsum", &OnnxImporter::einsum},
      {"QuantizeLinear", &OnnxImporter::quantizeLinear},
      {"DequantizeLinear", &OnnxImporter::dequantizeLinear},
      {"DynamicQuantizeLinear", &OnnxImporter::dynamicQuantizeLinear},
      {"MatMulInteger", &OnnxImporter::matmulInteger},
      {"QLinearMatMul", &OnnxImporter::qlinearMatmul},
      {"DepthToSpace", &OnnxImporter::depthSpace},
      {"SpaceToDepth", &OnnxImporter::depthSpace},
      {"Shrink", &OnnxImporter::shrink},
      {"EyeLike", &OnnxImporter::eyeLike},
      {"ConvTranspose", &OnnxImporter::convTranspose},
      {"InstanceNormalization", &OnnxImporter::instanceNorm},
      {"Hardmax", &OnnxImporter::hardmax},
      {"OneHot", &OnnxImporter::oneHot},
      {"NegativeLogLikelihoodLoss", &OnnxImporter::nllLossNode},
      {"ArgMin", &OnnxImporter::argReduce<ArgMinOp>},
      {"Floor", &OnnxImporter::unary<FloorOp>},
      {"Ceil", &OnnxImporter::unary<CeilOp>},
      {"Round", &OnnxImporter::unary<RoundOp>},
      {"Sign", &OnnxImporter::unary<SignOp>},
      {"Softplus", &OnnxImporter::unary<SoftplusOp>},
      {"IsNaN", &OnnxImporter::isNan},
      {"IsInf", &OnnxImporter::isInf},
      {"Clip", &OnnxImporter::clip},
      {"LeakyRelu", &OnnxImporter::leakyRelu},
      {"Mod", &OnnxImporter::mod},
      {"Trilu", &OnnxImporter::trilu},
      {"CumSum", &OnnxImporter::cumsum},
      {"SoftmaxCrossEntropyLoss", &OnnxImporter::softmaxCrossEntropyLoss},
      {"Cast", &OnnxImporter::castNode},
      {"CastLike", &OnnxImporter::castLike},
      {"Where", &OnnxImporter::where},
      {"MatMul", &OnnxImporter::matmul},
      {"Gemm", &OnnxImporter::gemm},
      {"ReduceMean", &OnnxImporter::reduce<ReduceMeanOp>},
      {"ReduceSum", &OnnxImporter::reduce<ReduceSumOp>},
      {"ReduceMax", &OnnxImporter::reduce<ReduceMaxOp>},
      {"ReduceMin", &OnnxImporter::reduce<ReduceMinOp>},
      {"ReduceProd", &OnnxImporter::reduce<ReduceProdOp>},
      {"ReduceL1", &OnnxImporter::reduceComposite},
      {"ReduceL2", &OnnxImporter::reduceComposite},
      {"ReduceSumSquare", &OnnxImporter::reduceComposite},
      {"ReduceLogSum", &OnnxImporter::reduceComposite},
      {"ReduceLogSumExp", &OnnxImporter::reduceComposite},
      {"Softmax", &OnnxImporter::softmax<SoftmaxOp>},
      {"LogSoftmax", &OnnxImporter::softmax<LogSoftmaxOp>},
      {"LayerNormalization", &OnnxImporter::layerNorm},
      {"Reshape", &OnnxImporter::reshapeNode},
      {"Flatten", &OnnxImporter::flatten},
      {"Transpose", &OnnxImporter::transpose},
      {"Slice", &OnnxImporter::slice},
      {"Split", &OnnxImporter::split},
      {"Concat", &OnnxImporter::concat},
      {"Gather", &OnnxImporter::gather},
      {"Expand", &OnnxImporter::expand},
      {"Squeeze", &OnnxImporter::squeeze},
      {"Unsqueeze", &OnnxImporter::unsqueeze},
      {"Shape", &OnnxImporter::shape},
      {"Size", &OnnxImporter::size},
      {"ConstantOfShape", &OnnxImporter::constantOfShape},
      {"Range", &OnnxImporter::range},
  };
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
  options.inputShapes[name] = shape;
  return true;
}

bool mlir::ds::parseBindInputSpec(StringRef spec, ImportOptions &options, std::string &error) {
  auto [name, path] = spec.split('=');
  if (name.empty() || path.empty()) {
    error = "--bind-input expects NAME=FILE.npy (got '" + spec.str() + "')";
    return false;
  }
  options.boundInputs[name] = path.str();
  return true;
}

OwningOpRef<ModuleOp> mlir::ds::importOnnxModel(MLIRContext *context,
                                                const onnx::ModelProto &model,
                                                const std::string &path,
                                                const ImportOptions &options) {
  context->loadDialect<DSDialect, func::FuncDialect>();
  OnnxImporter importer(context, options, path);
  OwningOpRef<ModuleOp> module = importer.run(model);
  if (!module) return nullptr;
  // Constants used only to compute shapes, and parameters nothing reads.
  SmallVector<Operation *> dead;
  module->walk([&](Operation *op) {
    if (isa<ConstantOp, ParameterOp>(op) && op->use_empty()) dead.push_back(op);
  });
  for (Operation *op : dead) op->erase();
  return module;
}

OwningOpRef<ModuleOp> mlir::ds::importOnnxFile(MLIRContext *context, const std::string &path,
                                               const ImportOptions &options) {
  auto model = readModelFile(path);
  if (!model) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << llvm::toString(model.takeError());
    return nullptr;
  }
  return importOnnxModel(context, *model, path, options);
}
