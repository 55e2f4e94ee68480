//===- DSOps.td - ops of the ds dialect --------------------*- tablegen -*-===//
//
// Every description ends with a **Constraints:** list; the verifier (ODS
// type constraints, traits, or verify()) checks exactly that list, and each
// item has an expected-error case in test/Dialect/ds/*_verification.mlir.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_TD
#define DS_OPS_TD

include "dialects/ds/DSDialect.td"
include "dialects/ds/DSEnums.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// The narrow types (float8, float4, 4- and 2-bit integers) are storage
// types: ONNX models carry them through Cast, QuantizeLinear and
// DequantizeLinear and the data-movement ops; arithmetic widens first. A
// plan keeps one element per byte (docs/plan-format.md).
def DS_NarrowType : AnyTypeOf<[F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0FNU, F4E2M1FN,
                               I<4>, UI<4>, I<2>, UI<2>]>;
def DS_ElementType : AnyTypeOf<[F16, BF16, F32, F64, I1, I8, I16, I32, I64, UI8, UI16, UI32, UI64,
                                DS_NarrowType]>;
def DS_Tensor : StaticShapeTensorOf<[DS_ElementType]>;
def DS_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def DS_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I8, I16, I32, I64,
                                           UI8, UI16, UI32, UI64]>;
// Matrix products: floats, and the i32/i64 accumulators of integer GEMMs
// (ONNX MatMulInteger/QLinearMatMul widen their 8-bit inputs first).
def DS_F32Tensor : StaticShapeTensorOf<[F32]>;
def DS_MatmulTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def DS_BoolTensor : StaticShapeTensorOf<[I1]>;
def DS_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def DS_I64Tensor : StaticShapeTensorOf<[I64]>;
def DS_IntegerTensor : StaticShapeTensorOf<[I8, I16, I32, I64, UI8, UI16, UI32, UI64]>;

// Mesh, shardings and collectives use the types above.
include "dialects/ds/DSSharding.td"

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

def DS_ConstantOp : DS_DataOp<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor known at compile time that is not a trainable parameter:
    folded shape arithmetic, ONNX `Constant` nodes, masks.

    ```mlir
    %0 = ds.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```

    **Constraints:**
    - `value` has the result type.
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def DS_FillOp : DS_Op<"fill", [Pure], DS_OwnStep> {
  let summary = "a tensor with every element set to one value";
  let description = [{
    Like a splat constant, but a kernel rather than plan weight bytes: it
    zeroes gradient accumulators and fills large tensors without storing
    them in the plan.

    ```mlir
    %z = ds.fill 0.0 : tensor<1024x1024xf32>
    ```

    **Constraints:**
    - none beyond the result being a float tensor.
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def DS_RandomMaskOp : DS_Op<"random_mask", [Pure], DS_OwnStep> {
  let summary = "dropout's scaled keep mask from a counter-based generator";
  let description = [{
    Each element is `1 / (1 - ratio)` with probability `1 - ratio`, else
    zero: `x * mask` is inverted dropout, as `torch.nn.Dropout` computes in
    training. The mask is a pure function of the `key` operand (one i64 per
    micro-step and rank, fed by ds-run), the `stream` attribute (one per
    Dropout in the model) and the element's index, so it is `Pure`:
    recomputing it, or computing it on another thread split or backend,
    gives the same bits, and two masks with the same key, stream and type
    are the same value. The gradient of `x * mask` is `dy * mask`.

    ```mlir
    %m = ds.random_mask %key {ratio = 1.000000e-01 : f64, stream = 3 : i64} : tensor<i64> -> tensor<4x8xf32>
    ```

    **Constraints:**
    - `key` is a scalar i64 tensor;
    - `ratio` is in [0, 1).
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$key, F64Attr:$ratio, I64Attr:$stream);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$key attr-dict `:` type($key) `->` type($result)";
  let hasVerifier = 1;
}

def DS_RandomOp : DS_Op<"random", [Pure], DS_OwnStep> {
  let summary = "samples of a uniform or normal distribution from a counter-based generator";
  let description = [{
    ONNX's RandomUniform, RandomNormal, their -Like forms and Bernoulli
    (a uniform sample compared with the probabilities). Element i is a pure
    function of (`key`, `stream`, i), as ds.random_mask's are: uniform
    samples take the top 53 bits of SplitMix64's output of the element's
    counter; normal ones are Box-Muller of two such samples. `key` is the
    plan's `rng_key` input (fed by ds-run from `--seed`) or, for a node
    with a `seed` attribute, a constant made from the seed.

    ```mlir
    %u = ds.random %key {distribution = #ds<distribution uniform>, a = 0.0 : f64, b = 1.0 : f64, stream = 0 : i64} : tensor<i64> -> tensor<4x8xf32>
    ```

    **Constraints:**
    - `key` is a scalar i64 tensor;
    - uniform: `a` <= `b`, both finite; normal: `b` >= 0, both finite.
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$key, DS_DistributionAttr:$distribution, F64Attr:$a,
                       F64Attr:$b, I64Attr:$stream);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$key attr-dict `:` type($key) `->` type($result)";
  let hasVerifier = 1;
}

def DS_ParameterOp : DS_DataOp<"parameter",
    [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a named model parameter (an ONNX initializer)";
  let description = [{
    A weight of the model. Its name is the ONNX initializer's, so plans,
    checkpoints and exported models can refer back to it. Large values are
    held as `dense_resource` blobs.

    ```mlir
    %w = ds.parameter "fc1.weight" = dense_resource<fc1.weight> : tensor<16x8xf32>
    ```

    **Constraints:**
    - `sym_name` is not empty.
    - `value` has the result type.
  }];
  let arguments = (ins StrAttr:$sym_name, TypedAttrInterface:$value);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$sym_name `=` $value attr-dict";
  let hasVerifier = 1;
}

include "dialects/ds/ops/ElementwiseOps.td"
include "dialects/ds/ops/LinalgOps.td"
include "dialects/ds/ops/ReductionOps.td"
include "dialects/ds/ops/DataMovementOps.td"
include "dialects/ds/ops/TrainingOps.td"
include "dialects/ds/ops/FusedOps.td"

#endif // DS_OPS_TD
