//===- CollectiveOps.cpp - facts of the collectives -----------------------===//
//
// Collectives run on the communication stream over the ranks that share
// every mesh coordinate but `axes`; shard_slice is local (no
// communication) and stays on the compute stream.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/ops/OpFacts.h"

using namespace mlir;
using namespace mlir::ds;

static void describeCollective(Operation *op, ArrayAttr axesAttr, KernelStep &s) {
  std::string axes;
  for (Attribute a : axesAttr) axes += (axes.empty() ? "" : ",") + cast<StringAttr>(a).str();
  s.setString("axes", axes);
  s.stream = isa<ShardSliceOp>(op) ? 0 : 1;
  for (const char *name : {"dim", "outer", "root", "split_dim", "concat_dim", "quantize_block"})
    if (auto v = op->getAttrOfType<IntegerAttr>(name)) s.setInt(name, v.getInt());
  if (auto r = op->getAttrOfType<CollectiveReductionAttr>("reduction"))
    s.setString("reduction", stringifyCollectiveReduction(r.getValue()));
}

void AllReduceOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void AllGatherOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void ReduceScatterOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void ShardSliceOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void BroadcastOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void AllToAllOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
void CompressedAllReduceOp::describeKernelStep(KernelStep &s) {
  describeCollective(getOperation(), getAxes(), s);
}
