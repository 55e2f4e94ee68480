//===- ImporterCore.h - what the ONNX op families share ---------*- C++ -*-===//
//
// The ONNX importer is a core (OnnxImporter.cpp: model and opset checks,
// the graph walk, dispatch) plus one file per op family (ElementwiseOps.cpp,
// NNOps.cpp, TensorOps.cpp, ...). What they share lives here:
//
//  - ImportState: everything that lives for the whole import (builder,
//    options, opset, the current node's location, the ONNX name -> SSA
//    value map).
//  - NodeImporter: a view of that state under the member names the
//    handlers use (b_, loc_, values_, opset_, ...), constructed per node,
//    plus the helpers more than one family uses. Each family derives its
//    own XImporter from it with the family's handlers and private helpers.
//  - HandlerTable: ONNX op_type -> handler. Each family fills it in its
//    registerXHandlers, one `add<XImporter, &XImporter::method>("OpType")`
//    line per op; adding an op touches only its family's file.
//
// Private to lib/Import.
//
//===----------------------------------------------------------------------===//
#ifndef DS_LIB_IMPORT_IMPORTERCORE_H
#define DS_LIB_IMPORT_IMPORTERCORE_H

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "dialects/ds/DSOps.h"
#include "ds/Import/OnnxImporter.h"
#include "ds/Import/OnnxModelFile.h"
#include "ds/Import/TorchParameters.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Path.h"

/// `DS_TRY(x, expr)`: `auto x = *expr`, returning failure() from the
/// enclosing function when `expr` (a FailureOr) failed.
#define DS_TRY(lhs, expr)                                                      \
  auto lhs##OrFail = (expr);                                                   \
  if (failed(lhs##OrFail))                                                     \
    return failure();                                                          \
  auto lhs = *lhs##OrFail

namespace mlir::ds::importer {

/// "[3, 3]": a kernel's extents, for messages.
inline std::string extents(ArrayRef<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}


/// The importer's state for one model, shared by the core and every
/// handler.
struct ImportState {
  ImportState(MLIRContext *context, const ImportOptions &options, std::string modelPath)
      : ctx(context), b(context), opts(options), path(std::move(modelPath)) {
    dir = llvm::sys::path::parent_path(path).str();
    if (dir.empty()) dir = ".";
  }

  MLIRContext *ctx;
  OpBuilder b;
  const ImportOptions &opts;
  /// The model file, and the directory external data is read beneath.
  std::string path, dir;
  /// The model's opset of the default domain.
  int64_t opset = 0;
  /// The node being imported (its name, op, domain and opset), or the
  /// initializer; every op built and every error goes here.
  Location loc = UnknownLoc::get(ctx);
  /// ONNX value name -> the SSA value computing it.
  llvm::StringMap<Value> values;
  /// ONNX sequence values: exporters build them with static lengths
  /// (SplitToSequence, SequenceConstruct), so the importer keeps each as
  /// the list of its tensors, and the sequence ops resolve at import.
  llvm::StringMap<SmallVector<Value>> sequences;
  /// ONNX optional values (Optional, If branches of optional type): whether
  /// each holds a tensor is known at import, so the importer keeps the
  /// tensor (null: empty) and OptionalHasElement/OptionalGetElement
  /// resolve at import.
  llvm::StringMap<Value> optionals;
  /// Training-mode Dropout and the random generators: main's "rng_key"
  /// argument (made by the first) and the streams handed out, one per node.
  Value rngKey;
  int64_t randomStreams = 0;
  /// Which initializers are parameters, by the exporter's records.
  const ParameterRecovery *recovery = nullptr;
  /// The model is the importer's own (read from a file): initializers'
  /// raw_data moves into the IR instead of being copied.
  bool consumeModel = false;
  /// The inputs of the current node its handler read (by index): an input
  /// a handler never reads would be dropped silently (OnnxImporter checks).
  std::vector<bool> inputsRead;
  /// Imports a subgraph (an If branch, a Loop or Scan body) in the current
  /// scope with its inputs bound to `inputs` and returns its outputs; the
  /// names it defines are dropped after it, so a body imports once per
  /// iteration. Set by the core importer (OnnxImporter.cpp).
  std::function<FailureOr<SmallVector<Value>>(const onnx::GraphProto &, ArrayRef<Value>)>
      importSubgraph;
};

/// The base of every op family's importer: references to the shared state
/// and the helpers handlers build with. Cheap to construct (a handful of
/// references), so one is made per node.
class NodeImporter {
public:
  explicit NodeImporter(ImportState &s)
      : ctx_(s.ctx), b_(s.b), opts_(s.opts), path_(s.path), dir_(s.dir), opset_(s.opset),
        loc_(s.loc), values_(s.values), sequences_(s.sequences), optionals_(s.optionals),
        rngKey_(s.rngKey),
        randomStreams_(s.randomStreams), consumeModel_(s.consumeModel),
        inputsRead_(s.inputsRead), importSubgraph_(s.importSubgraph) {}

  // ---- generic handlers (any family may register them) ---------------------------
  template <typename OpTy> LogicalResult unary(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult binary(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult variadic(const onnx::NodeProto &n);

protected:
  // ---- diagnostics ---------------------------------------------------------
  InFlightDiagnostic nodeError(const onnx::NodeProto &) { return emitError(loc_); }

  // ---- values ----------------------------------------------------------------
  /// Records that the handler reads input `i` (every input accessor does).
  void markRead(int i) {
    if (i >= 0 && static_cast<size_t>(i) < inputsRead_.size()) inputsRead_[i] = true;
  }
  Value input(const onnx::NodeProto &n, int i) {
    markRead(i);
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
  /// constantOf, or the value of a one-element float initializer (which
  /// imports as a parameter but is a literal wherever a node needs a value
  /// known at compile time: OneHot's depth, Range's bounds, Pad's fill).
  DenseElementsAttr literalOf(Value v) {
    if (DenseElementsAttr c = constantOf(v)) return c;
    if (auto p = v ? v.getDefiningOp<ParameterOp>() : ParameterOp();
        p && p.getType().getNumElements() == 1)
      return dyn_cast<DenseElementsAttr>(p.getValue());
    return nullptr;
  }
  /// Integer values of an input that must be known at compile time.
  FailureOr<SmallVector<int64_t>> constantInts(const onnx::NodeProto &n, int i,
                                               StringRef what) {
    Value v = input(n, i);
    DenseElementsAttr c = constantOf(v);
    if (!c || !isa<IntegerType>(c.getElementType())) {
      InFlightDiagnostic d = nodeError(n);
      d << "input '" << what << "' must be a constant integer tensor known at compile time";
      // A graph input itself is a value only --bind-input fixes; one
      // computed from shapes becomes constant once the shapes are fixed.
      if (auto arg = dyn_cast_or_null<BlockArgument>(v))
        d << " (it is graph input '" << n.input(i) << "': give its value with --bind-input "
          << n.input(i) << "=FILE.npy)";
      else
        d << " (fix dynamic input dimensions with --input-shape, or graph inputs it is "
             "computed from with --bind-input)";
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
  /// ds.conv's operand groups (input, weight, bias?, addend?) for the
  /// generic builder: the importer never gives an addend.
  NamedAttribute convSegments(bool bias) {
    return attr("operandSegmentSizes", b_.getDenseI32ArrayAttr({1, 1, bias ? 1 : 0, 0}));
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
  /// Errors a constant decides alone are found here, not at every run of
  /// the plan. Constant indices (input `i`) must be inside the data: index
  /// element e into a dimension of sizes[e % sizes.size()] (one size for
  /// Gather, the row's components for GatherND); a dynamic size is not
  /// checked. `what` names those dimensions in the message, numbered from
  /// `firstDim` when that is >= 0 (GatherND's data dimensions).
  LogicalResult checkConstantIndices(const onnx::NodeProto &n, int i, ArrayRef<int64_t> sizes,
                                     StringRef what, int64_t firstDim = -1) {
    DenseElementsAttr c = constantOf(input(n, i));
    if (!c || !isa<IntegerType>(c.getElementType()) || sizes.empty()) return success();
    int64_t e = 0;
    for (const APInt &x : c.getValues<APInt>()) {
      const int64_t v = x.getSExtValue(), size = sizes[e % sizes.size()];
      if (size >= 0 && (v < -size || v >= size))
        return nodeError(n) << "index " << v << " (element " << e << " of constant '"
                            << n.input(i) << "') is out of range for " << what
                            << (firstDim >= 0 ? " " + std::to_string(firstDim + e % sizes.size())
                                              : std::string())
                            << " of size " << size;
      ++e;
    }
    return success();
  }
  /// An integer divisor (input `i`) that is a constant holding 0.
  LogicalResult checkConstantDivisor(const onnx::NodeProto &n, int i) {
    DenseElementsAttr c = constantOf(input(n, i));
    if (!c || !isa<IntegerType>(c.getElementType())) return success();
    int64_t e = 0;
    for (const APInt &x : c.getValues<APInt>()) {
      if (x.isZero())
        return nodeError(n) << "divides by zero: element " << e << " of the constant divisor '"
                            << n.input(i) << "' is 0";
      ++e;
    }
    return success();
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
    // The narrow types: storage for Cast, QuantizeLinear and DequantizeLinear.
    case kOnnxFloat8E4M3FN: return Float8E4M3FNType::get(b_.getContext());
    case kOnnxFloat8E4M3FNUZ: return Float8E4M3FNUZType::get(b_.getContext());
    case kOnnxFloat8E5M2: return Float8E5M2Type::get(b_.getContext());
    case kOnnxFloat8E5M2FNUZ: return Float8E5M2FNUZType::get(b_.getContext());
    case kOnnxFloat8E8M0: return Float8E8M0FNUType::get(b_.getContext());
    case kOnnxFloat4E2M1: return Float4E2M1FNType::get(b_.getContext());
    case kOnnxInt4: return b_.getIntegerType(4);
    case kOnnxUint4: return b_.getIntegerType(4, false);
    case kOnnxInt2: return b_.getIntegerType(2);
    case kOnnxUint2: return b_.getIntegerType(2, false);
    default: return failure();
    }
  }
  /// The element type an int attribute names (Cast's `to`, DequantizeLinear's
  /// `output_dtype`), or `dflt` when the attribute is absent or 0 (UNDEFINED).
  FailureOr<Type> typeAttrOr(const onnx::NodeProto &n, StringRef name, Type dflt) {
    FailureOr<int64_t> code = intAttr(n, name, 0);
    if (failed(code)) return failure();
    if (*code == 0) return dflt;
    FailureOr<Type> t = elementType(static_cast<int32_t>(*code));
    if (failed(t)) {
      nodeError(n) << "attribute '" << name << "' names element type " << *code
                   << ", which ds does not support";
      return failure();
    }
    return *t;
  }
  /// A tensor proto as an attribute: dense_resource when large (weights),
  /// dense otherwise.
  FailureOr<TypedAttr> tensorAttr(const onnx::TensorProto &t, Location loc) {
    // --shapes-only: external weights are placeholders of their shape (a
    // splat of 1/64: exact in every float type, and neither 0 nor 1, which
    // folds would treat as special).
    if (opts_.shapesOnly && t.has_data_location() &&
        t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
      FailureOr<Type> elem = elementType(t.data_type());
      if (failed(elem)) {
        emitError(loc) << "tensor '" << t.name() << "' has unsupported element type "
                       << onnxTypeName(t.data_type());
        return failure();
      }
      SmallVector<int64_t> shape;
      for (int64_t d : t.dims()) {
        if (d < 0) {
          emitError(loc) << "tensor '" << t.name() << "' has a negative dimension";
          return failure();
        }
        shape.push_back(d);
      }
      auto type = RankedTensorType::get(shape, *elem);
      if (auto f = dyn_cast<FloatType>(*elem))
        return cast<TypedAttr>(DenseElementsAttr::get(type, b_.getFloatAttr(f, 1.0 / 64)));
      if (elem->isInteger(1)) return cast<TypedAttr>(DenseElementsAttr::get(type, true));
      return cast<TypedAttr>(DenseElementsAttr::get(type, b_.getIntegerAttr(*elem, 1)));
    }
    // A model the importer owns gives its weights away instead of copying.
    auto payload = consumeModel_ ? takeTensorPayload(const_cast<onnx::TensorProto &>(t), dir_)
                                 : readTensorPayload(t, dir_);
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
      // The blob owns the payload's buffer (operator new aligns it to 16).
      auto *owned = new std::string(std::move(payload->bytes));
      AsmResourceBlob blob(ArrayRef<char>(owned->data(), owned->size()), alignof(uint64_t),
                           [owned](void *, size_t, size_t) { delete owned; },
                           /*dataIsMutable=*/true);
      return cast<TypedAttr>(DenseResourceElementsAttr::get(type, key, std::move(blob)));
    }
    ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>(payload->bytes.data()),
                            payload->bytes.size());
    return cast<TypedAttr>(denseFromBytes(type, bytes));
  }

  // ---- building blocks shared by several families (ImporterCore.cpp) ---------------
  FailureOr<Value> legacyBroadcast(const onnx::NodeProto &n, Value a, Value c);
  template <typename OpTy>
  FailureOr<Value> reduceWith(Value x, ArrayRef<int64_t> axes, bool keepdims);
  FailureOr<Value> sliceAxis(Value x, int64_t axis, int64_t start, int64_t step, int64_t count);
  /// Fails (naming the node) unless `dims` (computed in 128 bits from the
  /// file's values) are non-negative and hold at most --max-elements
  /// elements; `out` gets them as int64.
  LogicalResult checkedShape(const onnx::NodeProto &n, ArrayRef<__int128> dims,
                             SmallVectorImpl<int64_t> &out, StringRef what);
  FailureOr<Value> padWith(const onnx::NodeProto &n, Value x, ArrayRef<int64_t> lo,
                           ArrayRef<int64_t> hi, StringRef mode, Attribute fill);
  Value iota(int64_t n, int64_t axis, int64_t rank, Type elem);
  FailureOr<SmallVector<int64_t>> windowPads(const onnx::NodeProto &n, ArrayRef<int64_t> in,
                                             ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                             ArrayRef<int64_t> dilations);
  FailureOr<Value> convolution(const onnx::NodeProto &n, Value x, Value w, Value bias);

  MLIRContext *ctx_;
  OpBuilder &b_;
  const ImportOptions &opts_;
  const std::string &path_, &dir_;
  int64_t &opset_;
  Location &loc_;
  llvm::StringMap<Value> &values_;
  llvm::StringMap<SmallVector<Value>> &sequences_;
  llvm::StringMap<Value> &optionals_;
  Value &rngKey_;
  int64_t &randomStreams_;
  bool consumeModel_;
  std::vector<bool> &inputsRead_;
  const std::function<FailureOr<SmallVector<Value>>(const onnx::GraphProto &, ArrayRef<Value>)>
      &importSubgraph_;
};

template <typename OpTy> LogicalResult NodeImporter::unary(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(y, buildTyped<OpTy>(x.getType(), x));
  setOutput(n, 0, y);
  return success();
}

template <typename OpTy> LogicalResult NodeImporter::binary(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(c0, required(n, 1));
  DS_TRY(c, legacyBroadcast(n, a, c0));
  DS_TRY(y, build<OpTy>({a, c}));
  setOutput(n, 0, y);
  return success();
}

/// Min, Max, Sum: a left fold of the binary op over all inputs.
template <typename OpTy> LogicalResult NodeImporter::variadic(const onnx::NodeProto &n) {
  DS_TRY(acc, required(n, 0));
  for (int i = 1; i < n.input_size(); ++i) {
    DS_TRY(x, required(n, i));
    DS_TRY(next, build<OpTy>({acc, x}));
    // ONNX Max and Min split their gradient at ties, as torch.maximum /
    // torch.minimum do (the max and min the importer composes, Clip's, do
    // not: PyTorch's clamp passes all of it at its bounds).
    if constexpr (std::is_same_v<OpTy, MaxOp> || std::is_same_v<OpTy, MinOp>)
      next.getDefiningOp()->setAttr("ds.split_ties", b_.getUnitAttr());
    acc = next;
  }
  setOutput(n, 0, acc);
  return success();
}

template <typename OpTy>
FailureOr<Value> NodeImporter::reduceWith(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return build<OpTy>({x}, {arrAttr("axes", axes), attr("keepdims", b_.getBoolAttr(keepdims))});
}

/// Imports one node: builds its ops at the state's location and maps its
/// outputs in the state's value map; errors are emitted at that location.
using Handler = LogicalResult (*)(ImportState &, const onnx::NodeProto &);

/// ONNX op_type -> handler, for the default domain.
class HandlerTable {
public:
  /// Registers `Method` of `Family` (a NodeImporter) for `opType`: the
  /// handler constructs a Family on the state and calls the method.
  template <typename Family, auto Method> void add(StringRef opType) {
    static_assert(std::is_base_of_v<NodeImporter, Family>, "families derive from NodeImporter");
    if (!table_.try_emplace(opType, &invoke<Family, Method>).second)
      llvm::report_fatal_error(llvm::Twine("ONNX op '") + opType + "' is registered twice");
  }
  /// The handler of `opType`, or null when ds does not import it.
  Handler lookup(StringRef opType) const {
    auto it = table_.find(opType);
    return it == table_.end() ? nullptr : it->second;
  }

private:
  template <typename Family, auto Method>
  static LogicalResult invoke(ImportState &state, const onnx::NodeProto &n) {
    Family importer(state);
    return (importer.*Method)(n);
  }

  llvm::StringMap<Handler> table_;
};

// One per family file; OnnxImporter.cpp calls them all to build its table.
void registerElementwiseHandlers(HandlerTable &table);
void registerNNHandlers(HandlerTable &table);
void registerMatMulHandlers(HandlerTable &table);
void registerTensorHandlers(HandlerTable &table);
void registerIndexingHandlers(HandlerTable &table);
void registerConstantHandlers(HandlerTable &table);
void registerReductionHandlers(HandlerTable &table);
void registerQuantizationHandlers(HandlerTable &table);
void registerLossHandlers(HandlerTable &table);
void registerSequenceHandlers(HandlerTable &table);
void registerAttentionHandlers(HandlerTable &table);
void registerResizeHandlers(HandlerTable &table);
void registerControlFlowHandlers(HandlerTable &table);
void registerRecurrentHandlers(HandlerTable &table);
void registerSpectralHandlers(HandlerTable &table);

} // namespace mlir::ds::importer

#endif // DS_LIB_IMPORT_IMPORTERCORE_H
