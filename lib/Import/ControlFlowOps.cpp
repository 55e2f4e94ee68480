//===- ControlFlowOps.cpp - If, Loop and Scan, resolved at import ---------===//
//
// Exporters mostly write control flow whose decisions the shapes already
// make: an If on a condition computed from shapes, a Loop with a constant
// trip count, a Scan over a sequence of static length. ds resolves these at
// import, as it does sequences: If imports the branch its condition (a
// compile-time constant) selects; Loop and Scan unroll, importing the body
// once per iteration (its condition must fold to a constant each time), so
// the plan holds only tensor ops with buffers planned across iterations,
// and autodiff differentiates through them. A decision only the data makes
// is refused, naming the node and what must be known.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class ControlFlowImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult ifNode(const onnx::NodeProto &n);
  LogicalResult loop(const onnx::NodeProto &n);
  LogicalResult scan(const onnx::NodeProto &n);

private:
  const onnx::GraphProto *graphAttr(const onnx::NodeProto &n, StringRef name) {
    const onnx::AttributeProto *a = findAttr(n, name);
    return a && a->type() == onnx::AttributeProto_AttributeType_GRAPH ? &a->g() : nullptr;
  }
  /// A scalar condition's value, when known at compile time.
  std::optional<bool> knownCondition(Value v) {
    DenseElementsAttr c = constantOf(v);
    if (!c || c.getNumElements() != 1) return std::nullopt;
    if (c.getElementType().isInteger(1)) return *c.getValues<bool>().begin();
    if (isa<IntegerType>(c.getElementType())) return !(*c.getValues<APInt>().begin()).isZero();
    return std::nullopt;
  }
  /// Values stacked along a new axis `axis` (reversed first if `reverse`).
  FailureOr<Value> stack(ArrayRef<Value> parts, int64_t axis, bool reverse);
  /// The budget of unrolled body nodes (ds-opt --max-nodes).
  LogicalResult checkUnroll(const onnx::NodeProto &n, int64_t iterations,
                            const onnx::GraphProto &body) {
    if (iterations * std::max(1, body.node_size()) > opts_.maxNodes)
      return nodeError(n) << "unrolling " << iterations << " iterations of a "
                          << body.node_size() << "-node body exceeds the limit of "
                          << opts_.maxNodes << " nodes (raise it with ds-opt --max-nodes)";
    return success();
  }
};

FailureOr<Value> ControlFlowImporter::stack(ArrayRef<Value> parts, int64_t axis, bool reverse) {
  SmallVector<Value> rows;
  for (Value v : parts) {
    SmallVector<int64_t> shape(typeOf(v).getShape());
    if (axis < 0 || axis > static_cast<int64_t>(shape.size()))
      return FailureOr<Value>(emitError(loc_) << "output axis " << axis << " is out of range");
    shape.insert(shape.begin() + axis, 1);
    DS_TRY(r, reshape(v, shape));
    rows.push_back(r);
  }
  if (reverse) std::reverse(rows.begin(), rows.end());
  if (rows.size() == 1) return rows[0];
  return build<ConcatOp>(rows, {i64Attr("axis", axis)});
}

// If: the branch the (compile-time) condition selects.
LogicalResult ControlFlowImporter::ifNode(const onnx::NodeProto &n) {
  DS_TRY(cond, required(n, 0));
  std::optional<bool> taken = knownCondition(cond);
  if (!taken)
    return nodeError(n) << "the condition must be known at compile time: ds imports the branch "
                           "it selects (fix the graph inputs it depends on with --bind-input "
                           "or --input-shape)";
  const onnx::GraphProto *branch = graphAttr(n, *taken ? "then_branch" : "else_branch");
  if (!branch) return nodeError(n) << "needs graph attributes then_branch and else_branch";
  DS_TRY(outs, importSubgraph_(*branch, {}));
  if (static_cast<int>(outs.size()) != n.output_size())
    return nodeError(n) << "the " << (*taken ? "then" : "else") << " branch gives "
                        << outs.size() << " outputs for " << n.output_size();
  for (int i = 0; i < n.output_size(); ++i) setOutput(n, i, outs[i]);
  return success();
}

// Loop: the body once per iteration while the trip count lasts and the
// condition holds; both must be known at every step.
LogicalResult ControlFlowImporter::loop(const onnx::NodeProto &n) {
  const onnx::GraphProto *body = graphAttr(n, "body");
  if (!body) return nodeError(n) << "needs graph attribute 'body'";
  Value tripV = input(n, 0), condV = input(n, 1);
  int64_t trips = std::numeric_limits<int64_t>::max();
  if (tripV) {
    DenseElementsAttr c = constantOf(tripV);
    if (!c || c.getNumElements() != 1 || !isa<IntegerType>(c.getElementType()))
      return nodeError(n) << "the trip count M must be known at compile time: ds unrolls Loops";
    trips = (*c.getValues<APInt>().begin()).getSExtValue();
  }
  bool cond = true;
  if (condV) {
    std::optional<bool> c = knownCondition(condV);
    if (!c) return nodeError(n) << "the initial condition must be known at compile time";
    cond = *c;
  }
  int64_t carriedCount = n.input_size() - 2;
  int64_t scanCount = body->output_size() - 1 - carriedCount;
  if (carriedCount < 0 || scanCount < 0 || body->input_size() != carriedCount + 2)
    return nodeError(n) << "the body must take (iteration, condition, " << carriedCount
                        << " loop-carried values) and give (condition, the carried values, "
                           "scan outputs)";
  SmallVector<Value> carried;
  for (int i = 2; i < n.input_size(); ++i) {
    DS_TRY(v, required(n, i));
    carried.push_back(v);
  }
  SmallVector<SmallVector<Value>> scans(scanCount);
  const bool bounded = trips != std::numeric_limits<int64_t>::max();
  if (bounded && cond && failed(checkUnroll(n, trips, *body))) return failure();
  int64_t i = 0;
  for (; i < trips && cond; ++i) {
    if (!bounded && failed(checkUnroll(n, i + 1, *body))) return failure();
    SmallVector<Value> args{scalar(b_.getI64Type(), static_cast<double>(i)),
                            constant(DenseElementsAttr::get(
                                RankedTensorType::get({}, b_.getI1Type()), true))};
    args.append(carried.begin(), carried.end());
    DS_TRY(outs, importSubgraph_(*body, args));
    std::optional<bool> next = knownCondition(outs[0]);
    if (!next)
      return nodeError(n) << "the condition the body computes at iteration " << i
                          << " is not known at compile time: ds unrolls Loops";
    cond = *next;
    for (int64_t k = 0; k < carriedCount; ++k) carried[k] = outs[1 + k];
    for (int64_t k = 0; k < scanCount; ++k) scans[k].push_back(outs[1 + carriedCount + k]);
  }
  if (!bounded && cond)
    return nodeError(n) << "the loop has no trip count and its condition never became false";
  for (int64_t k = 0; k < carriedCount; ++k) setOutput(n, k, carried[k]);
  for (int64_t k = 0; k < scanCount; ++k) {
    if (scans[k].empty())
      return nodeError(n) << "scan output " << k << " of a loop that runs no iteration has no "
                          << "element shape to give";
    DS_TRY(s, stack(scans[k], 0, false));
    setOutput(n, carriedCount + k, s);
  }
  return success();
}

// Scan (opset 9 on): the body once per position of the scanned axes, with
// the state carried; scan outputs stacked along their axes.
LogicalResult ControlFlowImporter::scan(const onnx::NodeProto &n) {
  if (opset_ < 9) return nodeError(n) << "Scan before opset 9 (batched form) is not supported";
  const onnx::GraphProto *body = graphAttr(n, "body");
  if (!body) return nodeError(n) << "needs graph attribute 'body'";
  DS_TRY(numScanInputs, intAttr(n, "num_scan_inputs"));
  if (numScanInputs < 1 || numScanInputs > n.input_size())
    return nodeError(n) << "num_scan_inputs " << numScanInputs << " must be in [1, "
                        << n.input_size() << "] (the node's inputs)";
  int64_t stateCount = n.input_size() - numScanInputs;
  int64_t scanOutCount = body->output_size() - stateCount;
  if (numScanInputs < 1 || stateCount < 0 || scanOutCount < 0 ||
      body->input_size() != n.input_size())
    return nodeError(n) << "the body must take the " << stateCount << " states and "
                        << numScanInputs << " scan slices, and give the states and scan outputs";
  auto listAttr = [&](StringRef name, int64_t count) -> FailureOr<SmallVector<int64_t>> {
    DS_TRY(v, intsAttr(n, name));
    SmallVector<int64_t> out = v ? *v : SmallVector<int64_t>(count, 0);
    if (static_cast<int64_t>(out.size()) != count)
      return FailureOr<SmallVector<int64_t>>(nodeError(n) << name << " needs " << count
                                                          << " entries");
    return out;
  };
  DS_TRY(inAxes, listAttr("scan_input_axes", numScanInputs));
  DS_TRY(inDirs, listAttr("scan_input_directions", numScanInputs));
  DS_TRY(outAxes, listAttr("scan_output_axes", scanOutCount));
  DS_TRY(outDirs, listAttr("scan_output_directions", scanOutCount));
  SmallVector<Value> state, scanned;
  for (int64_t i = 0; i < stateCount; ++i) {
    DS_TRY(v, required(n, i));
    state.push_back(v);
  }
  int64_t length = -1;
  for (int64_t i = 0; i < numScanInputs; ++i) {
    DS_TRY(v, required(n, stateCount + i));
    int64_t rank = typeOf(v).getRank();
    if (failed(normalizeAxis(n, inAxes[i], rank))) return failure();
    int64_t len = typeOf(v).getDimSize(inAxes[i]);
    if (length >= 0 && len != length)
      return nodeError(n) << "scan inputs have lengths " << length << " and " << len;
    length = len;
    scanned.push_back(v);
  }
  if (failed(checkUnroll(n, length, *body))) return failure();
  SmallVector<SmallVector<Value>> outs(scanOutCount);
  for (int64_t t = 0; t < length; ++t) {
    SmallVector<Value> args(state);
    for (int64_t i = 0; i < numScanInputs; ++i) {
      int64_t at = inDirs[i] ? length - 1 - t : t;
      DS_TRY(slice, sliceAxis(scanned[i], inAxes[i], at, 1, 1));
      SmallVector<int64_t> shape(typeOf(slice).getShape());
      shape.erase(shape.begin() + inAxes[i]);
      DS_TRY(row, reshape(slice, shape));
      args.push_back(row);
    }
    DS_TRY(res, importSubgraph_(*body, args));
    for (int64_t k = 0; k < stateCount; ++k) state[k] = res[k];
    for (int64_t k = 0; k < scanOutCount; ++k) outs[k].push_back(res[stateCount + k]);
  }
  for (int64_t k = 0; k < stateCount; ++k) setOutput(n, k, state[k]);
  for (int64_t k = 0; k < scanOutCount; ++k) {
    if (outs[k].empty()) return nodeError(n) << "a scan over no elements has no output shape";
    int64_t rank = typeOf(outs[k][0]).getRank() + 1, axis = outAxes[k];
    if (failed(normalizeAxis(n, axis, rank))) return failure();
    DS_TRY(s, stack(outs[k], axis, outDirs[k] != 0));
    setOutput(n, stateCount + k, s);
  }
  return success();
}

} // namespace

void mlir::ds::importer::registerControlFlowHandlers(HandlerTable &t) {
  using I = ControlFlowImporter;
  t.add<I, &I::ifNode>("If");
  t.add<I, &I::loop>("Loop");
  t.add<I, &I::scan>("Scan");
}
