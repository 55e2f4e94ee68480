//===- SequenceOps.cpp - ONNX sequence ops, resolved at import ------------===//
//
// Exporters emit sequences of statically known length: PyTorch's
// TorchScript exporter writes `torch.split` as SplitToSequence followed by
// SequenceAt, and list concatenation as ConcatFromSequence. The importer
// keeps each sequence as the list of its tensors (ImportState::sequences),
// so these ops become the tensor ops they amount to (slices, a concat) and
// no sequence reaches the IR. Positions must be known at compile time.
// Optionals likewise: whether one holds a tensor is known at import
// (ImportState::optionals), so OptionalHasElement is a constant and
// OptionalGetElement the tensor (or sequence) itself.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class SequenceImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult splitToSequence(const onnx::NodeProto &n);
  LogicalResult construct(const onnx::NodeProto &n);
  LogicalResult empty(const onnx::NodeProto &n);
  LogicalResult at(const onnx::NodeProto &n);
  LogicalResult length(const onnx::NodeProto &n);
  LogicalResult insert(const onnx::NodeProto &n);
  LogicalResult erase(const onnx::NodeProto &n);
  LogicalResult concatFromSequence(const onnx::NodeProto &n);
  LogicalResult optional(const onnx::NodeProto &n);
  LogicalResult optionalHasElement(const onnx::NodeProto &n);
  LogicalResult optionalGetElement(const onnx::NodeProto &n);

private:
  FailureOr<SmallVector<Value>> sequence(const onnx::NodeProto &n, int i) {
    markRead(i);
    auto it = i < n.input_size() ? sequences_.find(n.input(i)) : sequences_.end();
    if (it == sequences_.end()) {
      nodeError(n) << "input " << i << " must be a sequence (made by SplitToSequence, "
                   << "SequenceConstruct or SequenceEmpty in this graph)";
      return failure();
    }
    return it->second;
  }
  void setSequence(const onnx::NodeProto &n, SmallVector<Value> v) {
    if (n.output_size() > 0 && !n.output(0).empty()) sequences_[n.output(0)] = std::move(v);
  }
  /// A position input (a scalar integer known at compile time), checked
  /// against [lo, hi] and made non-negative by adding `size`.
  FailureOr<int64_t> position(const onnx::NodeProto &n, int i, int64_t size, int64_t lo,
                              int64_t hi) {
    DS_TRY(p, constantInts(n, i, "position"));
    if (p.size() != 1) {
      nodeError(n) << "position must be one integer, got " << p.size();
      return failure();
    }
    if (p[0] < lo || p[0] > hi) {
      nodeError(n) << "position " << p[0] << " is out of range [" << lo << ", " << hi
                   << "] for a sequence of " << size;
      return failure();
    }
    return p[0] < 0 ? p[0] + size : p[0];
  }
};

LogicalResult SequenceImporter::splitToSequence(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  int64_t dim = typeOf(x).getDimSize(axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (input(n, 1)) {
    DS_TRY(split, constantInts(n, 1, "split"));
    if (typeOf(input(n, 1)).getRank() == 0) {
      // One chunk size; the last chunk takes what is left.
      if (split[0] <= 0) return nodeError(n) << "split size must be positive, got " << split[0];
      for (int64_t at = 0; at < dim; at += split[0]) sizes.push_back(std::min(split[0], dim - at));
    } else {
      int64_t total = 0;
      for (int64_t s : split) {
        if (s < 0) return nodeError(n) << "split sizes must be non-negative, got " << s;
        total += s;
      }
      if (total != dim)
        return nodeError(n) << "split sizes add up to " << total << ", not the axis' " << dim;
      sizes = split;
    }
  } else {
    // No split: pieces of 1, without the axis unless keepdims.
    sizes.assign(dim, 1);
    squeeze = keepdims == 0;
  }
  SmallVector<Value> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    DS_TRY(piece, sliceAxis(x, axis, start, 1, s));
    if (squeeze) {
      SmallVector<int64_t> shape(typeOf(piece).getShape());
      shape.erase(shape.begin() + axis);
      DS_TRY(r, reshape(piece, shape));
      piece = r;
    }
    pieces.push_back(piece);
    start += s;
  }
  setSequence(n, std::move(pieces));
  return success();
}

LogicalResult SequenceImporter::construct(const onnx::NodeProto &n) {
  SmallVector<Value> items;
  for (int i = 0; i < n.input_size(); ++i) {
    DS_TRY(v, required(n, i));
    if (!items.empty() && typeOf(v).getElementType() != typeOf(items[0]).getElementType())
      return nodeError(n) << "sequence elements must share one element type";
    items.push_back(v);
  }
  setSequence(n, std::move(items));
  return success();
}

LogicalResult SequenceImporter::empty(const onnx::NodeProto &n) {
  setSequence(n, {});
  return success();
}

LogicalResult SequenceImporter::at(const onnx::NodeProto &n) {
  DS_TRY(seq, sequence(n, 0));
  int64_t size = static_cast<int64_t>(seq.size());
  DS_TRY(pos, position(n, 1, size, -size, size - 1));
  setOutput(n, 0, seq[pos]);
  return success();
}

LogicalResult SequenceImporter::length(const onnx::NodeProto &n) {
  DS_TRY(seq, sequence(n, 0));
  setOutput(n, 0, scalar(b_.getI64Type(), static_cast<double>(seq.size())));
  return success();
}

LogicalResult SequenceImporter::insert(const onnx::NodeProto &n) {
  DS_TRY(seq, sequence(n, 0));
  DS_TRY(v, required(n, 1));
  int64_t size = static_cast<int64_t>(seq.size());
  int64_t at = size;
  if (input(n, 2)) {
    DS_TRY(p, position(n, 2, size, -size, size));
    at = p;
  }
  if (!seq.empty() && typeOf(v).getElementType() != typeOf(seq[0]).getElementType())
    return nodeError(n) << "the inserted tensor's element type differs from the sequence's";
  seq.insert(seq.begin() + at, v);
  setSequence(n, std::move(seq));
  return success();
}

LogicalResult SequenceImporter::erase(const onnx::NodeProto &n) {
  DS_TRY(seq, sequence(n, 0));
  int64_t size = static_cast<int64_t>(seq.size());
  if (size == 0) return nodeError(n) << "cannot erase from an empty sequence";
  int64_t at = size - 1;
  if (input(n, 1)) {
    DS_TRY(p, position(n, 1, size, -size, size - 1));
    at = p;
  }
  seq.erase(seq.begin() + at);
  setSequence(n, std::move(seq));
  return success();
}

LogicalResult SequenceImporter::concatFromSequence(const onnx::NodeProto &n) {
  DS_TRY(seq, sequence(n, 0));
  if (seq.empty()) return nodeError(n) << "cannot concatenate an empty sequence";
  DS_TRY(axis, intAttr(n, "axis"));
  DS_TRY(newAxis, intAttr(n, "new_axis", 0));
  int64_t rank = typeOf(seq[0]).getRank();
  // With new_axis the elements stack along an inserted axis (range [-r-1, r]).
  if (failed(normalizeAxis(n, axis, newAxis ? rank + 1 : rank))) return failure();
  SmallVector<Value> parts;
  for (Value v : seq) {
    if (newAxis) {
      SmallVector<int64_t> shape(typeOf(v).getShape());
      shape.insert(shape.begin() + axis, 1);
      DS_TRY(r, reshape(v, shape));
      v = r;
    }
    parts.push_back(v);
  }
  if (parts.size() == 1) {
    setOutput(n, 0, parts[0]);
    return success();
  }
  DS_TRY(y, build<ConcatOp>(parts, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

// Optional: holds its input, or nothing (an input left out; `type` then
// names what it would hold). Optional sequences are not kept.
LogicalResult SequenceImporter::optional(const onnx::NodeProto &n) {
  markRead(0);
  if (n.input_size() == 0 || n.input(0).empty()) {
    if (n.output_size() > 0 && !n.output(0).empty()) optionals_[n.output(0)] = Value();
    return success();
  }
  if (sequences_.count(n.input(0)) || optionals_.count(n.input(0)))
    return nodeError(n) << "an optional holding a sequence or an optional is not supported";
  DS_TRY(v, required(n, 0));
  if (n.output_size() > 0 && !n.output(0).empty()) optionals_[n.output(0)] = v;
  return success();
}

// OptionalHasElement: false for a left-out input or an empty optional,
// true for a tensor, a sequence or an optional holding one (opset 18 takes
// plain tensors and sequences too).
LogicalResult SequenceImporter::optionalHasElement(const onnx::NodeProto &n) {
  markRead(0);
  bool has = false;
  if (n.input_size() > 0 && !n.input(0).empty()) {
    const std::string &in = n.input(0);
    if (auto it = optionals_.find(in); it != optionals_.end()) has = static_cast<bool>(it->second);
    else has = values_.count(in) || sequences_.count(in);
  }
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({}, b_.getI1Type()), has)));
  return success();
}

// OptionalGetElement: the tensor an optional holds (an error when it is
// empty), or a tensor or sequence given directly, unchanged.
LogicalResult SequenceImporter::optionalGetElement(const onnx::NodeProto &n) {
  markRead(0);
  if (n.input_size() == 0 || n.input(0).empty()) return nodeError(n) << "needs input 0";
  const std::string &in = n.input(0);
  if (auto it = optionals_.find(in); it != optionals_.end()) {
    if (!it->second) return nodeError(n) << "input '" << in << "' is an empty optional";
    setOutput(n, 0, it->second);
    return success();
  }
  if (auto it = sequences_.find(in); it != sequences_.end()) {
    if (n.output_size() > 0 && !n.output(0).empty()) sequences_[n.output(0)] = it->second;
    return success();
  }
  DS_TRY(v, required(n, 0));
  setOutput(n, 0, v);
  return success();
}

} // namespace

void mlir::ds::importer::registerSequenceHandlers(HandlerTable &t) {
  using I = SequenceImporter;
  t.add<I, &I::splitToSequence>("SplitToSequence");
  t.add<I, &I::construct>("SequenceConstruct");
  t.add<I, &I::empty>("SequenceEmpty");
  t.add<I, &I::at>("SequenceAt");
  t.add<I, &I::length>("SequenceLength");
  t.add<I, &I::insert>("SequenceInsert");
  t.add<I, &I::erase>("SequenceErase");
  t.add<I, &I::concatFromSequence>("ConcatFromSequence");
  t.add<I, &I::optional>("Optional");
  t.add<I, &I::optionalHasElement>("OptionalHasElement");
  t.add<I, &I::optionalGetElement>("OptionalGetElement");
}
