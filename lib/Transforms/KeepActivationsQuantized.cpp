//===- KeepActivationsQuantized.cpp - uint8 between quantized convolutions -===//
//
// After ds-raise-quantized-matmul each convolution of a QDQ model reads the
// f32 result of the one before and rounds it to uint8 itself. Where every
// reader of a convolution rounds it the same way, the producer rounds it
// once, as it stores the result (oneDNN writes uint8 directly), and the
// readers take the bytes as they are: between such layers the activations
// are a quarter of the memory traffic. onnxruntime's QLinearConv chains
// run the same way.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_KEEPACTIVATIONSQUANTIZEDPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct KeepActivationsQuantizedPass
    : public mlir::ds::impl::KeepActivationsQuantizedPassBase<KeepActivationsQuantizedPass> {
  void runOnOperation() override {
    SmallVector<QuantizedConvOp> convs;
    getOperation().walk([&](QuantizedConvOp c) { convs.push_back(c); });
    for (QuantizedConvOp c : convs) keep(c);
  }

  void keep(QuantizedConvOp producer) {
    auto type = producer.getType();
    // An f32 result with no epilogue the uint8 store cannot take.
    if (!type.getElementType().isF32() || producer.getAddend() ||
        producer.getActivation() != Activation::None || producer.getResult().use_empty())
      return;
    std::optional<std::pair<double, int64_t>> rounding;
    for (OpOperand &use : producer.getResult().getUses()) {
      auto reader = dyn_cast<QuantizedConvOp>(use.getOwner());
      if (!reader || use.getOperandNumber() != 0) return;
      std::pair<double, int64_t> r{reader.getInputScale().convertToDouble(),
                                   reader.getInputZeroPoint()};
      if (rounding && *rounding != r) return;
      rounding = r;
    }
    OpBuilder b(producer);
    producer.getResult().setType(
        RankedTensorType::get(type.getShape(), b.getIntegerType(8, /*isSigned=*/false)));
    producer.setOutputScaleAttr(b.getF64FloatAttr(rounding->first));
    producer.setOutputZeroPointAttr(b.getI64IntegerAttr(rounding->second));
    ++numKept;
  }
};

} // namespace
