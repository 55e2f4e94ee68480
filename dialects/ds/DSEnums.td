//===- DSEnums.td - enums of the ds dialect ----------------*- tablegen -*-===//
#ifndef DS_ENUMS_TD
#define DS_ENUMS_TD

include "dialects/ds/DSDialect.td"
include "mlir/IR/EnumAttr.td"

def DS_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_GeluApproximationAttr : EnumAttr<DS_Dialect, DS_GeluApproximation, "gelu_approximation">;

def DS_Distribution : I32EnumAttr<"Distribution",
    "what ds.random draws from", [
      // uniform on [a, b)
      I32EnumAttrCase<"Uniform", 0, "uniform">,
      // normal with mean a and standard deviation b
      I32EnumAttrCase<"Normal", 1, "normal">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_DistributionAttr : EnumAttr<DS_Dialect, DS_Distribution, "distribution">;

def DS_ScatterReduction : I32EnumAttr<"ScatterReduction",
    "how a scattered update combines with the element it lands on", [
      I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Add", 1, "add">,
      I32EnumAttrCase<"Mul", 2, "mul">, I32EnumAttrCase<"Max", 3, "max">,
      I32EnumAttrCase<"Min", 4, "min">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_ScatterReductionAttr : EnumAttr<DS_Dialect, DS_ScatterReduction, "scatter_reduction">;

def DS_Activation : I32EnumAttr<"Activation",
    "the activation a fused product applies to its result", [
      I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Relu", 1, "relu">,
      I32EnumAttrCase<"Gelu", 2, "gelu">, I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
      I32EnumAttrCase<"Silu", 4, "silu">, I32EnumAttrCase<"Sigmoid", 5, "sigmoid">,
      I32EnumAttrCase<"Tanh", 6, "tanh">,
      // x * clamp(x / 6 + 1/2, 0, 1) (ONNX HardSwish): ds.conv only
      I32EnumAttrCase<"HardSwish", 7, "hard_swish">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_ActivationAttr : EnumAttr<DS_Dialect, DS_Activation, "activation">;

def DS_Combine : I32EnumAttr<"Combine",
    "how a fused product's result meets its addend", [
      I32EnumAttrCase<"Add", 0, "add">, I32EnumAttrCase<"Mul", 1, "mul">,
      // addend is a GELU's input x: result = product * gelu'(x) (gelu_grad)
      I32EnumAttrCase<"GeluGrad", 2, "gelu_grad">,
      I32EnumAttrCase<"GeluTanhGrad", 3, "gelu_tanh_grad">,
      // addend is a softmax's result y: y * (product - sum(y * product)) per row
      I32EnumAttrCase<"SoftmaxGrad", 4, "softmax_grad">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_CombineAttr : EnumAttr<DS_Dialect, DS_Combine, "combine">;

def DS_ActivationQuant : I32EnumAttr<"ActivationQuant",
    "how a quantized product treats its f32 left operand", [
      // used as it is: the weight alone is quantized (dequantized as read)
      I32EnumAttrCase<"None", 0, "none">,
      // each row quantized to int8 at run time, symmetric: max|x| / 127
      I32EnumAttrCase<"DynamicPerRow", 1, "dynamic_per_row">,
      // the whole operand quantized to uint8 at run time, ONNX
      // DynamicQuantizeLinear's scale and zero point (onnxruntime's
      // quantize_dynamic)
      I32EnumAttrCase<"DynamicPerTensor", 2, "dynamic_per_tensor">,
      // the whole operand quantized to uint8 with a scale and zero point
      // fixed at compile time (a QDQ model's QuantizeLinear; the op's
      // input_scale and input_zero_point)
      I32EnumAttrCase<"StaticPerTensor", 3, "static_per_tensor">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_ActivationQuantAttr : EnumAttr<DS_Dialect, DS_ActivationQuant, "activation_quant">;

// Where a state global lives and where an op runs (ZeRO-Offload): on the
// accelerator ("device", the default when absent), in host memory, or
// swapped to NVMe through host staging buffers.
def DS_MemorySpace : I32EnumAttr<"MemorySpace",
    "where a buffer lives or an op runs", [
      I32EnumAttrCase<"Device", 0, "device">, I32EnumAttrCase<"Host", 1, "host">,
      I32EnumAttrCase<"Nvme", 2, "nvme">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_MemorySpaceAttr : EnumAttr<DS_Dialect, DS_MemorySpace, "memory_space">;

#endif // DS_ENUMS_TD
