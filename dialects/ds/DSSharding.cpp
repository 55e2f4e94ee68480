//===- DSSharding.cpp - mesh, shardings and collectives -------------------===//
#include "dialects/ds/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult MeshAxisAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                   int64_t size) {
  if (name.empty()) return emitError() << "mesh axis needs a name";
  if (size < 1) return emitError() << "mesh axis '" << name << "' has size " << size;
  return success();
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<MeshAxisAttr> axes) {
  llvm::StringSet<> seen;
  for (MeshAxisAttr a : axes)
    if (!seen.insert(a.getName()).second)
      return emitError() << "mesh axis '" << a.getName() << "' appears twice";
  return success();
}

int64_t MeshAttr::getNumRanks() const {
  int64_t n = 1;
  for (MeshAxisAttr a : getAxes()) n *= a.getSize();
  return n;
}

std::optional<int64_t> MeshAttr::getAxisSize(StringRef name) const {
  for (MeshAxisAttr a : getAxes())
    if (a.getName() == name) return a.getSize();
  return std::nullopt;
}

MeshAttr MeshAttr::lookup(Operation *op) {
  auto module = isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  return module ? module->getAttrOfType<MeshAttr>("ds.mesh") : MeshAttr();
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims,
                                   ArrayAttr partial, DenseI64ArrayAttr outer) {
  if (outer) {
    if (outer.size() != static_cast<int64_t>(dims.size()))
      return emitError() << "outer needs one entry per dimension";
    for (int64_t o : outer.asArrayRef())
      if (o < 1) return emitError() << "outer factors must be >= 1";
  }
  llvm::StringSet<> seen;
  auto axisList = [&](Attribute list, StringRef what) -> LogicalResult {
    auto arr = dyn_cast<ArrayAttr>(list);
    if (!arr) return emitError() << what << " must be a list of axis names";
    for (Attribute a : arr) {
      auto s = dyn_cast<StringAttr>(a);
      if (!s || s.getValue().empty()) return emitError() << what << " must hold axis names";
      if (!seen.insert(s.getValue()).second)
        return emitError() << "mesh axis '" << s.getValue() << "' is used twice";
    }
    return success();
  };
  for (Attribute d : dims)
    if (failed(axisList(d, "each dimension's sharding"))) return failure();
  if (partial && failed(axisList(partial, "partial"))) return failure();
  return success();
}

static ArrayAttr namesAttr(MLIRContext *ctx, ArrayRef<StringRef> names) {
  SmallVector<Attribute> v;
  for (StringRef n : names) v.push_back(StringAttr::get(ctx, n));
  return ArrayAttr::get(ctx, v);
}

ShardingAttr ShardingAttr::get(MLIRContext *ctx, ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partial, ArrayRef<int64_t> outer) {
  SmallVector<Attribute> d;
  for (const auto &axes : dims) d.push_back(namesAttr(ctx, axes));
  bool plain = llvm::all_of(outer, [](int64_t o) { return o == 1; });
  return get(ctx, ArrayAttr::get(ctx, d), partial.empty() ? ArrayAttr() : namesAttr(ctx, partial),
             plain ? DenseI64ArrayAttr() : DenseI64ArrayAttr::get(ctx, outer));
}

ShardingAttr ShardingAttr::replicated(MLIRContext *ctx, int64_t rank) {
  return get(ctx, SmallVector<SmallVector<StringRef>>(rank));
}

SmallVector<StringRef> ShardingAttr::axesOf(int64_t d) const {
  SmallVector<StringRef> out;
  for (Attribute a : cast<ArrayAttr>(getDims()[d])) out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

SmallVector<StringRef> ShardingAttr::partialAxes() const {
  SmallVector<StringRef> out;
  if (getPartial())
    for (Attribute a : getPartial()) out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

bool ShardingAttr::isReplicated() const {
  if (isPartial()) return false;
  for (Attribute d : getDims())
    if (!cast<ArrayAttr>(d).empty()) return false;
  return true;
}

ShardingAttr ShardingAttr::withoutPartial() const {
  return get(getContext(), getDims(), ArrayAttr(), getOuter());
}

FailureOr<int64_t> ShardingAttr::localExtent(int64_t d, int64_t extent, MeshAttr mesh) const {
  int64_t parts = 1;
  for (StringRef a : axesOf(d)) {
    std::optional<int64_t> n = mesh ? mesh.getAxisSize(a) : std::nullopt;
    if (!n) return failure();
    parts *= *n;
  }
  if (extent % (parts * outerOf(d))) return failure();
  return extent / parts;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// Checks that the module has a mesh and `axes` are distinct axes of it;
/// returns the group size (product of the axes' sizes).
static FailureOr<int64_t> groupSize(Operation *op, ArrayAttr axes) {
  MeshAttr mesh = MeshAttr::lookup(op);
  if (!mesh) return FailureOr<int64_t>(op->emitOpError("needs a ds.mesh on the module"));
  if (axes.empty()) return FailureOr<int64_t>(op->emitOpError("names no mesh axes"));
  llvm::StringSet<> seen;
  int64_t n = 1;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    std::optional<int64_t> size = mesh.getAxisSize(name);
    if (!size) return FailureOr<int64_t>(op->emitOpError("mesh has no axis '") << name << "'");
    if (!seen.insert(name).second)
      return FailureOr<int64_t>(op->emitOpError("names axis '") << name << "' twice");
    n *= *size;
  }
  return n;
}

/// Whether the function around `op` holds per-rank (local) types.
static bool isSpmd(Operation *op) {
  auto f = op->getParentOfType<func::FuncOp>();
  return f && f->hasAttr("ds.spmd");
}

/// Shared checks of the ops that split or join one dimension: `dim` in
/// range, and the shapes either equal (global view; `dim` divisible) or
/// related by the group size (spmd): big = small * n on `dim`.
static LogicalResult verifyResplit(Operation *op, RankedTensorType in, RankedTensorType out,
                                   int64_t dim, ArrayAttr axes, bool grows, int64_t outer) {
  FailureOr<int64_t> n = groupSize(op, axes);
  if (failed(n)) return failure();
  if (outer < 1) return op->emitOpError("outer must be >= 1");
  if (dim < 0 || dim >= in.getRank())
    return op->emitOpError("dim ") << dim << " is out of range for rank " << in.getRank();
  if (in.getElementType() != out.getElementType() || in.getRank() != out.getRank())
    return op->emitOpError("operand and result differ in element type or rank");
  if (!isSpmd(op)) {
    if (in.getShape() != out.getShape())
      return op->emitOpError("in the global view the result has the operand's shape");
    if (in.getDimSize(dim) % (*n * outer))
      return op->emitOpError("dimension ") << dim << " (" << in.getDimSize(dim)
                                           << ") does not divide by the group size " << *n
                                           << (outer > 1 ? " times outer" : "");
    return success();
  }
  if ((grows ? in : out).getDimSize(dim) % outer)
    return op->emitOpError("the local dimension ") << dim << " does not divide by outer " << outer;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t want = d != dim ? in.getDimSize(d)
                   : grows  ? in.getDimSize(d) * *n
                            : (in.getDimSize(d) % *n ? -1 : in.getDimSize(d) / *n);
    if (out.getDimSize(d) != want)
      return op->emitOpError("result dimension ")
             << d << " must be " << (grows ? "the operand's times" : "the operand's divided by")
             << " the group size " << *n << " on dim " << dim;
  }
  return success();
}

LogicalResult ShardOp::verify() {
  ShardingAttr s = getSharding();
  if (s.getRank() != getOperand().getType().getRank())
    return emitOpError("sharding has ") << s.getRank() << " dimensions, the operand "
                                        << getOperand().getType().getRank();
  MeshAttr mesh = MeshAttr::lookup(*this);
  if (!mesh) return emitOpError("needs a ds.mesh on the module");
  for (int64_t d = 0; d < s.getRank(); ++d) {
    for (StringRef a : s.axesOf(d))
      if (!mesh.getAxisSize(a)) return emitOpError("mesh has no axis '") << a << "'";
    if (failed(s.localExtent(d, getOperand().getType().getDimSize(d), mesh)))
      return emitOpError("dimension ") << d << " (" << getOperand().getType().getDimSize(d)
                                       << ") does not divide over its mesh axes";
  }
  for (StringRef a : s.partialAxes())
    if (!mesh.getAxisSize(a)) return emitOpError("mesh has no axis '") << a << "'";
  return success();
}

LogicalResult AllReduceOp::verify() { return groupSize(*this, getAxes()); }

LogicalResult BroadcastOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n)) return failure();
  if (getRoot() < 0 || getRoot() >= *n)
    return emitOpError("root ") << getRoot() << " is not a rank of the group of " << *n;
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (std::optional<uint64_t> block = getQuantizeBlock()) {
    Type e = getOperand().getType().getElementType();
    if (static_cast<int64_t>(*block) <= 0 || getOuter() != 1 ||
        !(e.isF32() || e.isF16() || e.isBF16()))
      return emitOpError("quantize_block needs a positive block, outer 1 and an f32, f16 or "
                         "bf16 operand");
  }
  return verifyResplit(*this, getOperand().getType(), getType(), getDim(), getAxes(), true,
                       getOuter());
}
LogicalResult ReduceScatterOp::verify() {
  if (std::optional<uint64_t> block = getQuantizeBlock()) {
    Type e = getOperand().getType().getElementType();
    CollectiveReduction r = getReduction();
    if (static_cast<int64_t>(*block) <= 0 || getOuter() != 1 ||
        !(e.isF32() || e.isF16() || e.isBF16()) || r != CollectiveReduction::Sum)
      return emitOpError("quantize_block needs a positive block, outer 1, an f32, f16 or bf16 "
                         "operand and a sum");
  }
  return verifyResplit(*this, getOperand().getType(), getType(), getDim(), getAxes(), false,
                       getOuter());
}
LogicalResult ShardSliceOp::verify() {
  return verifyResplit(*this, getOperand().getType(), getType(), getDim(), getAxes(), false,
                       getOuter());
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n)) return failure();
  auto in = getOperand().getType(), out = getType();
  int64_t sd = getSplitDim(), cd = getConcatDim(), rank = in.getRank();
  if (sd < 0 || sd >= rank || cd < 0 || cd >= rank)
    return emitOpError("split_dim and concat_dim must be dimensions of the operand");
  if (in.getElementType() != out.getElementType() || out.getRank() != rank)
    return emitOpError("operand and result differ in element type or rank");
  if (in.getDimSize(sd) % *n)
    return emitOpError("split_dim ") << sd << " (" << in.getDimSize(sd)
                                     << ") does not divide by the group size " << *n;
  SmallVector<int64_t> want(in.getShape());
  if (isSpmd(*this)) {
    want[sd] /= *n;
    want[cd] *= *n;
  }
  if (out.getShape() != ArrayRef<int64_t>(want))
    return emitOpError("result shape does not follow from split_dim and concat_dim");
  return success();
}

LogicalResult CompressedAllReduceOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n)) return failure();
  auto in = cast<RankedTensorType>(getOperand().getType());
  auto we = cast<RankedTensorType>(getWorkerError().getType());
  auto se = cast<RankedTensorType>(getServerError().getType());
  Type f32 = Float32Type::get(getContext());
  if (in.getElementType() != f32 || we.getElementType() != f32 || se.getElementType() != f32)
    return emitOpError("operands must be f32");
  if (getResult().getType() != in || getNewWorkerError().getType() != we ||
      getNewServerError().getType() != se)
    return emitOpError("results must have the types of the operand and the errors");
  if (we.getRank() != 1 || se.getRank() != 1)
    return emitOpError("the errors must be 1-D");
  const int64_t big = we.getDimSize(0);
  if (big < in.getNumElements() || big % (8 * *n) || se.getDimSize(0) * *n != big)
    return emitOpError("worker_error must have N >= ")
           << in.getNumElements() << " elements, a multiple of 8 times the group size " << *n
           << ", and server_error N / " << *n;
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding values (DSInterfaces.h)
//===----------------------------------------------------------------------===//

Sharding Sharding::fromAttr(ShardingAttr a) {
  Sharding s;
  for (int64_t d = 0; d < a.getRank(); ++d) s.dims.push_back({a.axesOf(d), a.outerOf(d)});
  s.partial = a.partialAxes();
  return s;
}

ShardingAttr Sharding::toAttr(MLIRContext *ctx) const {
  SmallVector<SmallVector<StringRef>> axes;
  SmallVector<int64_t> outer;
  for (const DimSharding &d : dims) {
    axes.push_back(d.axes);
    outer.push_back(d.isSplit() ? d.outer : 1);
  }
  return ShardingAttr::get(ctx, axes, partial, outer);
}

bool Sharding::isReplicated() const {
  return partial.empty() && llvm::none_of(dims, [](const DimSharding &d) { return d.isSplit(); });
}

int64_t mlir::ds::groupSizeOf(ArrayRef<StringRef> axes, MeshAttr mesh) {
  int64_t n = 1;
  for (StringRef a : axes) n *= mesh ? mesh.getAxisSize(a).value_or(1) : 1;
  return n;
}

/// The constraint is the identity on values: its gradient is the result's.
LogicalResult ShardOp::buildGradients(GradientBuilder &, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  d[0] = dres[0];
  return success();
}
