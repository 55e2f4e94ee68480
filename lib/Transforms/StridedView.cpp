//===- StridedView.cpp - layout ops read as strided indexing --------------===//
#include "ds/Transforms/StridedView.h"

#include "dialects/ds/DSOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Drops unit parts and joins neighbours that step over each other.
ViewDim simplify(int64_t size, ArrayRef<ViewPart> parts) {
  ViewDim d{size, {}};
  for (ViewPart p : parts) {
    if (p.size == 1) continue;
    if (!d.parts.empty() && d.parts.back().stride == p.stride * p.size)
      d.parts.back() = {d.parts.back().size * p.size, p.stride};
    else
      d.parts.push_back(p);
  }
  return d;
}

/// The contiguous row-major view of a value in memory.
StridedView contiguous(Value v) {
  StridedView view{v, {}};
  ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
  int64_t stride = 1;
  view.dims.resize(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    view.dims[i] = simplify(shape[i], {ViewPart{shape[i], stride}});
    stride *= shape[i];
  }
  return view;
}

/// `in` read with the shape `shape` (same element count): the parts of
/// all dimensions in order, dealt out to the new dimensions (a part split
/// where a dimension boundary falls inside it); nullopt when a boundary
/// does not divide a part.
std::optional<SmallVector<ViewDim>> reshapeView(ArrayRef<ViewDim> in, ArrayRef<int64_t> shape) {
  SmallVector<ViewPart> parts;
  for (const ViewDim &d : in) parts.append(d.parts.begin(), d.parts.end());
  SmallVector<ViewDim> out;
  size_t next = 0;
  for (int64_t size : shape) {
    SmallVector<ViewPart, 2> mine;
    int64_t need = size;
    while (need > 1) {
      if (next == parts.size()) return std::nullopt;
      ViewPart &p = parts[next];
      if (p.size <= need) {
        if (need % p.size) return std::nullopt;
        mine.push_back(p);
        need /= p.size;
        ++next;
      } else {
        if (p.size % need) return std::nullopt;
        // The boundary falls inside p: its high digits are this dimension's.
        int64_t low = p.size / need;
        mine.push_back({need, p.stride * low});
        p = {low, p.stride};
        need = 1;
      }
    }
    out.push_back(simplify(size, mine));
  }
  if (next != parts.size()) return std::nullopt;
  return out;
}

constexpr int kMaxDepth = 32;

StridedView trace(Value v, int depth, bool splits) {
  Operation *op = v.getDefiningOp();
  if (!op || depth > kMaxDepth || !isa<RankedTensorType>(v.getType())) return contiguous(v);
  ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
  if (auto t = dyn_cast<TransposeOp>(op)) {
    StridedView x = trace(t.getOperand(), depth + 1, splits);
    StridedView out{x.base, {}, x.offset};
    for (int64_t p : t.getPermutation()) out.dims.push_back(x.dims[p]);
    return out;
  }
  if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(op)) {
    StridedView x = trace(op->getOperand(0), depth + 1, splits);
    if (auto dims = reshapeView(x.dims, shape)) return StridedView{x.base, *dims, x.offset};
    return contiguous(v);
  }
  if (auto e = dyn_cast<ExpandOp>(op)) {
    StridedView x = trace(e.getOperand(), depth + 1, splits);
    SmallVector<ViewDim> dims(shape.size() - x.dims.size());
    dims.append(x.dims);
    for (size_t i = 0; i < shape.size(); ++i)
      if (dims[i].size != shape[i]) dims[i] = simplify(shape[i], {ViewPart{shape[i], 0}});
    return StridedView{x.base, dims, x.offset};
  }
  if (auto s = dyn_cast<SplitOp>(op); s && splits) {
    // Piece k starts where the pieces before it end along the axis, which
    // must step by one stride in the operand's view.
    StridedView x = trace(s.getOperand(), depth + 1, splits);
    const int64_t axis = s.getAxis();
    if (axis < 0 || axis >= static_cast<int64_t>(x.dims.size())) return contiguous(v);
    std::optional<int64_t> stride = x.dims[axis].stride();
    if (!stride) return contiguous(v);
    int64_t start = 0;
    for (Value piece : s.getResults()) {
      if (piece == v) break;
      start += cast<RankedTensorType>(piece.getType()).getShape()[axis];
    }
    StridedView out{x.base, x.dims, x.offset + start * *stride};
    out.dims[axis] = simplify(shape[axis], {ViewPart{shape[axis], *stride}});
    return out;
  }
  if (auto g = dyn_cast<GatherOp>(op); g && splits) {
    // A gather of one constant index (PyTorch's select: q, k, v picked out
    // of a packed [3, ...] projection) is the operand without that axis,
    // from the index's offset along it.
    auto c = g.getIndices().getDefiningOp<ConstantOp>();
    auto idx = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
    StridedView x = trace(g.getData(), depth + 1, splits);
    const int64_t axis = static_cast<int64_t>(g.getAxis());
    if (!idx || idx.getType().getRank() != 0 || !isa<IntegerType>(idx.getElementType()) ||
        axis >= static_cast<int64_t>(x.dims.size()))
      return contiguous(v);
    const int64_t n = x.dims[axis].size;
    int64_t i = (*idx.getValues<APInt>().begin()).getSExtValue();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return contiguous(v);
    // The index's digits over the axis's parts, least significant last.
    int64_t offset = x.offset;
    for (size_t p = x.dims[axis].parts.size(); p-- > 0;) {
      const ViewPart &part = x.dims[axis].parts[p];
      offset += (i % part.size) * part.stride;
      i /= part.size;
    }
    StridedView out{x.base, x.dims, offset};
    out.dims.erase(out.dims.begin() + axis);
    return out;
  }
  return contiguous(v);
}

} // namespace

StridedView mlir::ds::traceView(Value v, bool throughSplits) { return trace(v, 0, throughSplits); }

void mlir::ds::eraseDeadProducers(ArrayRef<Value> values) {
  // A set, seeded before anything is erased: one producer may feed several
  // of the values (or one op twice) and must be erased once.
  llvm::SetVector<Operation *> work;
  for (Value v : values)
    if (Operation *d = v.getDefiningOp()) work.insert(d);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!op->use_empty() || !isa<DSDialect>(op->getDialect()) || !isMemoryEffectFree(op) ||
        isa<ConstantOp, ParameterOp>(op))
      continue;
    for (Value in : op->getOperands())
      if (Operation *d = in.getDefiningOp()) work.insert(d);
    op->erase();
  }
}
