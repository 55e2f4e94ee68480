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

def DS_ElementType : AnyTypeOf<[F16, BF16, F32, F64, I1, I8, I16, I32, I64, UI8, UI16, UI32, UI64]>;
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

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

class DS_UnaryOp<string mnemonic, Type T, string desc, list<Trait> traits = []>
    : DS_Op<mnemonic, traits # [Pure, SameOperandsAndResultType, DS_Elementwise]> {
  let summary = "elementwise " # mnemonic;
  let description = desc # [{

**Constraints:**
- operand and result have the same type.
}];
  let arguments = (ins T:$operand);
  let results = (outs T:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def DS_SqrtOp : DS_UnaryOp<"sqrt", DS_FloatTensor, "`sqrt(x)`", [DS_Differentiable]>;
def DS_ReciprocalOp : DS_UnaryOp<"reciprocal", DS_FloatTensor, "`1 / x`", [DS_Differentiable]>;
def DS_ExpOp : DS_UnaryOp<"exp", DS_FloatTensor, "`e^x`", [DS_Differentiable]>;
def DS_LogOp : DS_UnaryOp<"log", DS_FloatTensor, "natural logarithm", [DS_Differentiable]>;
def DS_ErfOp : DS_UnaryOp<"erf", DS_FloatTensor, "the error function", [DS_Differentiable]>;
def DS_TanhOp : DS_UnaryOp<"tanh", DS_FloatTensor, "hyperbolic tangent", [DS_Differentiable]>;
def DS_SigmoidOp : DS_UnaryOp<"sigmoid", DS_FloatTensor, "`1 / (1 + e^-x)`", [DS_Differentiable]>;
def DS_ReluOp : DS_UnaryOp<"relu", DS_NumericTensor, "`max(x, 0)`", [DS_Differentiable]>;
def DS_NegOp : DS_UnaryOp<"neg", DS_NumericTensor, "`-x`", [DS_Differentiable]>;
def DS_AbsOp : DS_UnaryOp<"abs", DS_NumericTensor, "`|x|`", [DS_Differentiable]>;
def DS_NotOp : DS_UnaryOp<"not", DS_BoolTensor, "logical negation">;
def DS_SinOp : DS_UnaryOp<"sin", DS_FloatTensor, "sine", [DS_Differentiable]>;
def DS_CosOp : DS_UnaryOp<"cos", DS_FloatTensor, "cosine", [DS_Differentiable]>;
def DS_TanOp : DS_UnaryOp<"tan", DS_FloatTensor, "tangent", [DS_Differentiable]>;
def DS_AsinOp : DS_UnaryOp<"asin", DS_FloatTensor, "arcsine", [DS_Differentiable]>;
def DS_AcosOp : DS_UnaryOp<"acos", DS_FloatTensor, "arccosine", [DS_Differentiable]>;
def DS_AtanOp : DS_UnaryOp<"atan", DS_FloatTensor, "arctangent", [DS_Differentiable]>;
def DS_SinhOp : DS_UnaryOp<"sinh", DS_FloatTensor, "hyperbolic sine", [DS_Differentiable]>;
def DS_CoshOp : DS_UnaryOp<"cosh", DS_FloatTensor, "hyperbolic cosine", [DS_Differentiable]>;
def DS_AsinhOp : DS_UnaryOp<"asinh", DS_FloatTensor, "inverse hyperbolic sine", [DS_Differentiable]>;
def DS_AcoshOp : DS_UnaryOp<"acosh", DS_FloatTensor, "inverse hyperbolic cosine", [DS_Differentiable]>;
def DS_AtanhOp : DS_UnaryOp<"atanh", DS_FloatTensor, "inverse hyperbolic tangent", [DS_Differentiable]>;
def DS_FloorOp : DS_UnaryOp<"floor", DS_FloatTensor, "round toward negative infinity", [DS_Differentiable]>;
def DS_CeilOp : DS_UnaryOp<"ceil", DS_FloatTensor, "round toward positive infinity", [DS_Differentiable]>;
def DS_RoundOp : DS_UnaryOp<"round", DS_FloatTensor, "round half to even", [DS_Differentiable]>;
def DS_SignOp : DS_UnaryOp<"sign", DS_NumericTensor, "-1, 0 or 1", [DS_Differentiable]>;
def DS_SoftplusOp : DS_UnaryOp<"softplus", DS_FloatTensor, "`log(1 + e^x)`, computed stably", [DS_Differentiable]>;

class DS_PredicateOp<string mnemonic, string desc>
    : DS_Op<mnemonic, [Pure, SameOperandsAndResultShape, DS_Elementwise]> {
  let summary = desc;
  let description = desc # [{ (result i1).

**Constraints:**
- operand and result have the same shape.
}];
  let arguments = (ins DS_FloatTensor:$operand);
  let results = (outs DS_BoolTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
}
def DS_IsNanOp : DS_PredicateOp<"is_nan", "true where the element is NaN">;
def DS_IsInfOp : DS_PredicateOp<"is_inf", "true where the element is infinite">;

def DS_GeluOp : DS_Op<"gelu", [Pure, SameOperandsAndResultType, DS_Elementwise,
                                DS_Differentiable], DS_OwnStep> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x/2 * (1 + erf(x/sqrt(2)))`, or with `approximate = tanh`
    `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`, as in
    `torch.nn.GELU`.

    **Constraints:**
    - operand and result have the same floating-point tensor type.
  }];
  let arguments = (ins DS_FloatTensor:$operand,
                   DefaultValuedAttr<DS_GeluApproximationAttr,
                                     "GeluApproximation::None">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def DS_BitcastOp : DS_Op<"bitcast", [Pure, SameOperandsAndResultShape]> {
  let summary = "the same bits read as another element type";
  let description = [{
    Each element's bytes, unchanged, as an element of the result type
    (ONNX `BitCast`, little endian; i1 occupies a byte).

    **Constraints:**
    - operand and result have the same shape and element width in bits.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
}

def DS_CastOp : DS_Op<"cast", [Pure, SameOperandsAndResultShape, DS_Elementwise,
                                DS_Differentiable]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float to integer conversion truncates toward zero and saturates; any
    non-zero value converts to `true` (i1).

    **Constraints:**
    - operand and result have the same shape.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary, numpy broadcasting
//===----------------------------------------------------------------------===//

class DS_BinaryOp<string mnemonic, Type T, Type R, string desc,
                  list<Trait> traits = []>
    : DS_Op<mnemonic, traits # [Pure, DS_Elementwise,
        DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "elementwise " # mnemonic # " with broadcasting";
  let description = desc # [{

Operands broadcast like numpy: shapes are aligned at the right and a
dimension of 1 stretches.

**Constraints:**
- operands have the same element type.
- operand shapes broadcast; the result has the broadcast shape.
}];
  let arguments = (ins T:$lhs, T:$rhs);
  let results = (outs R:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

class DS_ArithOp<string mnemonic, string desc, list<Trait> traits = []>
    : DS_BinaryOp<mnemonic, DS_NumericTensor, DS_NumericTensor, desc, traits>;
class DS_CompareOp<string mnemonic, string desc>
    : DS_BinaryOp<mnemonic, DS_Tensor, DS_BoolTensor, desc # " (result i1)">;
class DS_LogicalOp<string mnemonic, string desc>
    : DS_BinaryOp<mnemonic, DS_BoolTensor, DS_BoolTensor, desc, [Commutative]>;

def DS_AddOp : DS_ArithOp<"add", "`lhs + rhs`", [Commutative, DS_Differentiable]>;
def DS_SubOp : DS_ArithOp<"sub", "`lhs - rhs`", [DS_Differentiable]>;
def DS_MulOp : DS_ArithOp<"mul", "`lhs * rhs`", [Commutative, DS_Differentiable]>;
def DS_DivOp : DS_ArithOp<"div", "`lhs / rhs`; integer division truncates",
                          [DS_Differentiable]>;
def DS_PowOp : DS_ArithOp<"pow", "`lhs ^ rhs`", [DS_Differentiable]> {
  // x^2, x^3, x^4 (a constant exponent) become multiplies.
  let hasCanonicalizer = 1;
}
def DS_MinOp : DS_ArithOp<"min", "the smaller operand; NaN propagates",
                          [Commutative, DS_Differentiable]>;
def DS_MaxOp : DS_ArithOp<"max", "the larger operand; NaN propagates",
                          [Commutative, DS_Differentiable]>;
def DS_ModOp : DS_ArithOp<"mod", "remainder: floored (sign of the divisor) for integers, "
                                  "truncated (C fmod) for floats, as ONNX Mod with fmod=1",
                          [DS_Differentiable]>;
def DS_EqualOp : DS_CompareOp<"equal", "`lhs == rhs`">;
def DS_LessOp : DS_CompareOp<"less", "`lhs < rhs`">;
def DS_GreaterOp : DS_CompareOp<"greater", "`lhs > rhs`">;
def DS_LessEqualOp : DS_CompareOp<"less_equal", "`lhs <= rhs`">;
def DS_GreaterEqualOp : DS_CompareOp<"greater_equal", "`lhs >= rhs`">;
def DS_AndOp : DS_LogicalOp<"and", "logical and">;
def DS_OrOp : DS_LogicalOp<"or", "logical or">;
def DS_XorOp : DS_LogicalOp<"xor", "logical exclusive or">;

class DS_BitwiseOp<string mnemonic, string desc, list<Trait> traits = []>
    : DS_BinaryOp<mnemonic, DS_IntegerTensor, DS_IntegerTensor, desc, traits>;
def DS_BitwiseAndOp : DS_BitwiseOp<"bitwise_and", "bits set in both operands", [Commutative]>;
def DS_BitwiseOrOp : DS_BitwiseOp<"bitwise_or", "bits set in either operand", [Commutative]>;
def DS_BitwiseXorOp : DS_BitwiseOp<"bitwise_xor", "bits set in exactly one operand",
                                   [Commutative]>;
def DS_ShiftLeftOp : DS_BitwiseOp<"shift_left",
    "`lhs << rhs`; bits past the width are dropped, and a shift below 0 or of the "
    "width or more gives 0 (ONNX `BitShift`)">;
def DS_ShiftRightOp : DS_BitwiseOp<"shift_right",
    "`lhs >> rhs`, filling with the sign bit for signed types; a shift below 0 or of "
    "the width or more leaves only the fill: -1 for a negative signed `lhs`, else 0 "
    "(ONNX `BitShift`)">;
def DS_BitwiseNotOp : DS_UnaryOp<"bitwise_not", DS_IntegerTensor, "`~x`, every bit flipped">;

def DS_WhereOp : DS_Op<"where",
    [Pure, DS_Elementwise, DS_Differentiable, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? on_true : on_false`, all three broadcast together.

    **Constraints:**
    - `on_true` and `on_false` have the same element type.
    - the three operand shapes broadcast; the result has the broadcast shape
      and the branches' element type.
  }];
  let arguments = (ins DS_BoolTensor:$condition, DS_Tensor:$on_true,
                   DS_Tensor:$on_false);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def DS_MatmulOp : DS_Op<"matmul",
    [Pure, DS_Differentiable, DS_OwnShardingRule,
     DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = "matrix product with numpy batch broadcasting";
  let description = [{
    `numpy.matmul` semantics: the last two dimensions multiply, leading
    (batch) dimensions broadcast; a rank-1 left operand is a row vector and
    a rank-1 right operand a column vector, their unit dimension dropped
    from the result. ONNX `Gemm` is imported as `matmul` plus `add`.

    ```mlir
    %y = ds.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
    ```

    Integer operands (i32, i64) accumulate in their own type and wrap on
    overflow, as two's complement GEMMs do.

    `transpose_lhs` / `transpose_rhs` read that operand with its last two
    dimensions swapped: what a `ds.transpose` feeding the product would do,
    done by the GEMM's own transposed access instead of a copy
    (canonicalization folds such transposes, which autodiff's backward
    products are full of).

    **Constraints:**
    - operands are float, i32 or i64 tensors of rank >= 1 with the same element type.
    - a transposed operand has rank >= 2 and is a float tensor.

    bf16 and f16 products sum in f32 and round the result once (fp32
    accumulation, as 16-bit GEMMs on CPUs and tensor cores do).
    - the contraction dimensions agree.
    - batch dimensions broadcast; the result has the numpy.matmul shape.
  }];
  let arguments = (ins DS_MatmulTensor:$lhs, DS_MatmulTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs DS_MatmulTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (N-D, channels second: [N, C, spatial...])
//===----------------------------------------------------------------------===//

def DS_ConvOp : DS_Op<"conv", [Pure, DS_Differentiable, AttrSizedOperandSegments], DS_OwnStep> {
  let summary = "N-D convolution with groups, strides, dilations and padding";
  let description = [{
    `input` [N, C, d...], `weight` [M, C/group, k...], optional `bias` [M];
    `pads` holds the begin pads of every spatial dimension, then the end
    pads (ONNX `Conv`; `auto_pad` is resolved at import).

    `clip_min` / `clip_max` clamp the result: an activation folded into the
    convolution by ds-fuse-epilogues (ReLU is `clip_min = 0`, ReLU6 clamps
    to [0, 6]), which the kernel applies as it writes the result. An
    `addend` (a residual that ds-fuse-epilogues folded in) is added to the
    result before the clamp: `clamp(conv(x) + bias + addend)`. An
    `activation` (`hard_swish`: MobileNetV3's, x * clamp(x / 6 + 1/2, 0, 1))
    applies to what the clamp leaves, also as the result is written.

    With `channels_last` the input is [N, d..., C] and the result
    [N, o..., M] (the weight keeps its layout): the layout oneDNN's CPU
    kernels compute in, which ds-conv-channels-last gives inference
    convolutions so activations stay in it from one convolution to the next.

    ```mlir
    %y = ds.conv %x, %w, %b {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
                             pads = array<i64: 1, 1, 1, 1>, group = 1 : i64, clip_min = 0.0 : f64}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    ```

    **Constraints:**
    - input and weight have the same rank >= 3 and element type.
    - `strides`, `dilations` have one entry per spatial dimension, `pads`
      two; strides and dilations are positive, pads non-negative.
    - `group` divides C and M, and the weight has C/group input channels.
    - `bias`, if present, is [M].
    - the result is [N, M, o...] with o = (d + pads - dilation (k - 1) - 1) / stride + 1.
    - `clip_min` <= `clip_max` when both are given; neither is NaN.
    - `activation` is `none` or `hard_swish`.
    - `addend`, if present, has the result's type.
    - with `channels_last`, the same holds with C and M last instead of second.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                   Optional<DS_FloatTensor>:$bias, Optional<DS_FloatTensor>:$addend,
                   DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads, I64Attr:$group,
                   OptionalAttr<F64Attr>:$clip_min, OptionalAttr<F64Attr>:$clip_max,
                   UnitAttr:$channels_last,
                   DefaultValuedAttr<DS_ActivationAttr, "Activation::None">:$activation);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`addend` $addend^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ConvGradOp : DS_Op<"conv_grad", [Pure], DS_OwnStep> {
  let summary = "gradients of conv with respect to input and weight";
  let description = [{
    For the output gradient `dy` of `conv(input, weight)` with the same
    attributes: `d_input` (col2im of weight^T dy) and `d_weight` (dy times
    the im2col of the input). The bias gradient is a sum of `dy`.

    **Constraints:**
    - the attributes satisfy conv's constraints for `input` and `weight`.
    - `dy` has conv's result shape; the results have the input's and the
      weight's types.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight, DS_FloatTensor:$dy,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads, I64Attr:$group);
  let results = (outs DS_FloatTensor:$d_input, DS_FloatTensor:$d_weight);
  let assemblyFormat = [{
    $input `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_PoolKind : I32EnumAttr<"PoolKind", "pooling reduction", [
    I32EnumAttrCase<"Max", 0, "max">, I32EnumAttrCase<"Avg", 1, "avg">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_PoolKindAttr : EnumAttr<DS_Dialect, DS_PoolKind, "pool_kind">;

def DS_PoolOp : DS_Op<"pool", [Pure, DS_Differentiable], DS_OwnStep> {
  let summary = "N-D max or average pooling";
  let description = [{
    Windows of `kernel` elements with `strides`, `dilations` and `pads`
    (begin pads, then end pads) over the spatial dimensions of
    [N, C, d...]. Padding never wins a max; an average divides by the
    window's in-bounds size unless `count_include_pad`. The result shape
    is given (ceil_mode is resolved at import).

    **Constraints:**
    - the input has rank >= 3; kernel, strides, dilations have one
      positive entry per spatial dimension, pads two non-negative ones.
    - the result is [N, C, o...] with every window starting inside the
      padded input, of the input's element type.
    - average pooling needs a floating-point input (max takes any number).
    - with `channels_last` (input [N, d..., C], result [N, o..., C], as
      ds-conv-channels-last leaves a pooling between convolutions), the
      same holds with C last; the input is f32.
  }];
  let arguments = (ins DS_NumericTensor:$input, DS_PoolKindAttr:$kind,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad,
                   UnitAttr:$channels_last);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_PoolGradOp : DS_Op<"pool_grad", [Pure], DS_OwnStep> {
  let summary = "gradient of pool with respect to its input";
  let description = [{
    Max: each window's gradient goes to its first maximum; average: spread
    over the window as the forward divided.

    **Constraints:**
    - the attributes and `dy`'s shape are those of `pool` on `input`.
    - the result has the input's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$dy, DS_PoolKindAttr:$kind,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_MaxPoolIndicesOp : DS_Op<"max_pool_indices", [Pure], DS_OwnStep> {
  let summary = "where each max-pooling window's maximum is";
  let description = [{
    For the windows of a max `pool` with the same attributes, the flat
    index of the first maximum in the whole input tensor (batch and channel
    offsets included), as ONNX MaxPool's `Indices` output. With
    `column_major` (ONNX `storage_order` 1) the spatial part of the index
    counts the first spatial dimension fastest.

    **Constraints:**
    - the attributes satisfy `pool`'s constraints for this input and shape.
    - the result is i64.
  }];
  let arguments = (ins DS_NumericTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads, DefaultValuedAttr<BoolAttr, "false">:$column_major);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

class DS_ReduceOp<string mnemonic, string desc>
    : DS_Op<mnemonic, [Pure, DS_Differentiable, DS_OwnShardingRule,
                       DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = desc # " over axes";
  let description = [{
    Reduces `operand` over `axes`. With `keepdims` the reduced dimensions
    stay as 1, otherwise they are dropped. Empty `axes` reduce nothing.

    **Constraints:**
    - `axes` are sorted, unique, and in [0, rank).
    - the result shape is the operand's with the axes reduced per `keepdims`.
  }];
  let arguments = (ins DS_NumericTensor:$operand, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def DS_ReduceSumOp : DS_ReduceOp<"reduce_sum", "sum">;
def DS_ReduceMeanOp : DS_ReduceOp<"reduce_mean", "arithmetic mean">;
def DS_ReduceMaxOp : DS_ReduceOp<"reduce_max", "maximum">;
def DS_ReduceMinOp : DS_ReduceOp<"reduce_min", "minimum">;
def DS_ReduceProdOp : DS_ReduceOp<"reduce_prod", "product">;

class DS_ArgOp<string mnemonic, string desc> : DS_Op<mnemonic, [Pure], DS_OwnStep> {
  let summary = "index of the " # desc # " along an axis";
  let description = [{
    i64 indices along `axis`, the first occurrence unless
    `select_last_index`; the axis stays as 1 with `keepdims`, else goes.

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
    - the result is i64 with the reduced shape.
  }];
  let arguments = (ins DS_NumericTensor:$operand, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
def DS_ArgMaxOp : DS_ArgOp<"arg_max", "maximum">;
def DS_ArgMinOp : DS_ArgOp<"arg_min", "minimum">;

def DS_TopKOp : DS_Op<"top_k", [Pure], DS_OwnStep> {
  let summary = "the k largest (or smallest) elements along an axis, and their indices";
  let description = [{
    Along `axis`, the `k` largest elements (smallest with `largest` false)
    and their i64 indices. Sorted from best to worst; among equal values
    the lower index comes first, and NaN counts as larger than any number
    (ONNX `TopK`, `torch.topk`).

    ```mlir
    %v, %i = ds.top_k %x {axis = 1 : i64, k = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    ```

    **Constraints:**
    - the operand has rank >= 1, `axis` is in [0, rank) and `k` in [0, dim].
    - `values` has the operand's element type, both results its shape with
      `k` on the axis, `indices` i64.
  }];
  let arguments = (ins DS_NumericTensor:$operand, I64Attr:$k, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs DS_NumericTensor:$values, StaticShapeTensorOf<[I64]>:$indices);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class DS_SoftmaxLikeOp<string mnemonic, string desc>
    : DS_Op<mnemonic, [Pure, SameOperandsAndResultType, DS_Differentiable,
                       DS_OwnShardingRule], DS_OwnStep> {
  let summary = desc;
  let description = desc # [{ along one axis (numerically stable: the
maximum is subtracted first).

**Constraints:**
- the operand has rank >= 1 and `axis` is in [0, rank).
}];
  let arguments = (ins DS_FloatTensor:$operand, I64Attr:$axis);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_SoftmaxOp : DS_SoftmaxLikeOp<"softmax", "softmax">;
def DS_LogSoftmaxOp : DS_SoftmaxLikeOp<"log_softmax", "log of softmax">;

def DS_MaskedSoftmaxOp : DS_Op<"masked_softmax",
    [Pure, AllTypesMatch<["operand", "result"]>, DS_Differentiable], DS_OwnStep> {
  let summary = "softmax over the last axis of masked scores";
  let description = [{
    `softmax(where(mask, mask_fill, operand))` with an i1 `mask` and
    `mask_fill` (`masked_fill`, exported as a `where`), or
    `softmax(operand + mask)` with an f32 `mask` (an additive mask), the
    mask broadcast to the operand. ds-fuse-softmax makes it from the two
    ops, so the masked scores are never written to memory: one row pass
    instead of two passes over attention-sized scores. Its gradient is
    `ds.softmax_grad` with the same i1 mask (masked scores get none).

    ```mlir
    %p = ds.masked_softmax %s, %causal {axis = 3 : i64, mask_fill = 0xFFF0000000000000 : f64}
        : (tensor<8x8x128x128xf32>, tensor<1x1x128x128xi1>) -> tensor<8x8x128x128xf32>
    ```

    **Constraints:**
    - the operand has rank >= 1 and `axis` is its last dimension.
    - `mask` broadcasts to the operand; it is i1 with `mask_fill`, else f32.
  }];
  let arguments = (ins DS_F32Tensor:$operand, DS_Tensor:$mask,
                   OptionalAttr<F64Attr>:$mask_fill, I64Attr:$axis);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = "$operand `,` $mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_LayerNormOp : DS_Op<"layer_norm", [Pure, AllTypesMatch<["operand", "result"]>,
                                          DS_Differentiable], DS_OwnStep> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `[axis, rank)`:
    `(x - mean) / sqrt(var + epsilon) * scale + bias` with the biased
    variance, as `torch.nn.LayerNorm` and ONNX `LayerNormalization`.

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
    - `scale` (and `bias`, if present) has shape `operand.shape[axis:]` and
      the operand's element type.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$scale,
                   Optional<DS_FloatTensor>:$bias, I64Attr:$axis,
                   F32Attr:$epsilon);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def DS_ReshapeOp : DS_Op<"reshape", [Pure, DS_LayoutOnly, DS_Differentiable,
                                    DS_OwnShardingRule], DS_OwnStep> {
  let summary = "the same elements in another shape";
  let description = [{
    Row-major reinterpretation. ONNX `Reshape`, `Flatten` and shape chains
    folded at import all become this op with a static result type.

    **Constraints:**
    - operand and result have the same element type and element count.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

class DS_AxesReshapeOp<string mnemonic, string desc>
    : DS_Op<mnemonic, [Pure, DS_LayoutOnly, DS_Differentiable, DS_OwnShardingRule,
                       DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = desc;
  let description = desc # [{ at `axes` (positions in the
result for unsqueeze, in the operand for squeeze).

**Constraints:**
- `axes` are sorted, unique and in range.
- for squeeze, every axis has extent 1.
}];
  let arguments = (ins DS_Tensor:$operand, DenseI64ArrayAttr:$axes);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def DS_SqueezeOp : DS_AxesReshapeOp<"squeeze", "removes unit dimensions">;
def DS_UnsqueezeOp : DS_AxesReshapeOp<"unsqueeze", "inserts unit dimensions">;

def DS_TransposeOp : DS_Op<"transpose",
    [Pure, DS_LayoutOnly, DS_Differentiable, DS_OwnShardingRule,
     DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = "permutes dimensions";
  let description = [{
    `result.shape[i] = operand.shape[permutation[i]]`.

    **Constraints:**
    - `permutation` is a permutation of [0, rank).
  }];
  let arguments = (ins DS_Tensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def DS_SliceOp : DS_Op<"slice", [Pure, DS_Differentiable, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "a strided window of a tensor";
  let description = [{
    `result[i...] = operand[starts + i * steps ...]`, per dimension, with
    the result shape giving the counts. Steps may be negative (reversal).
    ONNX `Slice` starts/ends/axes/steps are normalized at import.

    **Constraints:**
    - `starts` and `steps` have one entry per dimension; steps are non-zero.
    - operand and result have the same rank and element type.
    - every index a non-empty dimension touches lies inside the operand.
  }];
  let arguments = (ins DS_Tensor:$operand, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DS_ConcatOp : DS_Op<"concat",
    [Pure, DS_Differentiable, DS_OwnShardingRule,
     DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = "joins tensors along an axis";
  let description = [{
    **Constraints:**
    - at least one operand; all share element type and rank >= 1.
    - `axis` is in [0, rank); the operands agree off the axis.
  }];
  let arguments = (ins Variadic<DS_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def DS_SplitOp : DS_Op<"split", [Pure, DS_Differentiable, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "cuts a tensor into pieces along an axis";
  let description = [{
    The result types give the piece sizes.

    **Constraints:**
    - at least one result; the operand has rank >= 1 and `axis` in [0, rank).
    - results share the operand's element type and rank, agree with it off
      the axis, and their extents along the axis add up to the operand's.
  }];
  let arguments = (ins DS_Tensor:$operand, I64Attr:$axis);
  let results = (outs Variadic<DS_Tensor>:$results);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_GatherOp : DS_Op<"gather",
    [Pure, DS_Differentiable, DeclareOpInterfaceMethods<InferTypeOpInterface>], DS_OwnStep> {
  let summary = "selects slices along an axis by index (embedding lookup)";
  let description = [{
    `result = data[:axis] ++ indices.shape ++ data[axis+1:]`, as ONNX
    `Gather`; negative indices count from the end. Indices out of range
    are a run-time error. `padding_idx` (PyTorch's `Embedding(padding_idx)`,
    read from the exporter's records) changes only the gradient: that
    slice of `data` gets none.

    **Constraints:**
    - `data` has rank >= 1 and `axis` is in [0, rank).
  }];
  let arguments = (ins DS_Tensor:$data, DS_IndexTensor:$indices, I64Attr:$axis,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def DS_TriluOp : DS_Op<"trilu", [Pure, SameOperandsAndResultType, DS_Differentiable],
                       DS_OwnStep> {
  let summary = "keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    `upper`: keeps elements with `col - row >= k`; otherwise keeps
    `col - row <= k`; the rest become zero (ONNX `Trilu`).

    **Constraints:**
    - the operand has rank >= 2.
  }];
  let arguments = (ins DS_Tensor:$operand, BoolAttr:$upper, I64Attr:$k);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_CumSumOp : DS_Op<"cumsum", [Pure, SameOperandsAndResultType, DS_Differentiable],
                        DS_OwnStep> {
  let summary = "running sum along an axis";
  let description = [{
    `exclusive` leaves each element out of its own sum; `reverse` sums from
    the end (ONNX `CumSum`).

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
  }];
  let arguments = (ins DS_NumericTensor:$operand, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_CumProdOp : DS_Op<"cumprod", [Pure, SameOperandsAndResultType], DS_OwnStep> {
  let summary = "running product along an axis";
  let description = [{
    `exclusive` leaves each element out of its own product; `reverse`
    multiplies from the end (ONNX `CumProd`).

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
  }];
  let arguments = (ins DS_NumericTensor:$operand, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_GatherElementsOp : DS_Op<"gather_elements", [Pure, DS_Differentiable], DS_OwnStep> {
  let summary = "picks one element per index along an axis";
  let description = [{
    `result[i][j][k] = data[index[i][j][k]][j][k]` for `axis` 0, and so on
    (ONNX `GatherElements`, `torch.gather`); negative indices count from
    the end, out-of-range ones are a run-time error.

    **Constraints:**
    - `data` and `indices` have the same rank >= 1; `axis` is in [0, rank).
    - `indices` is no larger than `data` off the axis.
    - the result has the indices' shape and the data's element type.
  }];
  let arguments = (ins DS_Tensor:$data, DS_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_GatherElementsGradOp : DS_Op<"gather_elements_grad", [Pure], DS_OwnStep> {
  let summary = "scatter-add of gather_elements gradients to the data's shape";
  let description = [{
    **Constraints:**
    - `indices` and `dy` have one shape and the result's rank; `axis` is in range.
    - `dy` has the result's element type.
  }];
  let arguments = (ins DS_IndexTensor:$indices, DS_FloatTensor:$dy, I64Attr:$axis);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_ScatterElementsOp : DS_Op<"scatter_elements", [Pure], DS_OwnStep> {
  let summary = "a copy of data with updates written at indices along an axis";
  let description = [{
    The inverse of `gather_elements`: `result = data`, then for every
    position p of `indices`, `result[p with p[axis] = indices[p]]` is set to
    (or, with `reduction`, combined with) `updates[p]`, in row-major order
    of p, so with `none` the last duplicate wins. Negative indices count from
    the end; out-of-range ones are a run-time error (ONNX `ScatterElements`,
    and `ScatterND` after flattening).

    **Constraints:**
    - `data`, `indices` and `updates` have one rank >= 1; `axis` is in [0, rank).
    - `indices` and `updates` have one shape, no larger than `data` off the axis.
    - `updates` and the result have the data's type.
  }];
  let arguments = (ins DS_Tensor:$data, DS_IndexTensor:$indices, DS_Tensor:$updates,
                   I64Attr:$axis,
                   DefaultValuedAttr<DS_ScatterReductionAttr, "ScatterReduction::None">:$reduction);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ExpandOp : DS_Op<"expand", [Pure, DS_Differentiable, DS_OwnShardingRule]> {
  let summary = "broadcasts a tensor to a larger shape";
  let description = [{
    **Constraints:**
    - operand and result have the same element type.
    - the operand broadcasts to the result shape (numpy rules).
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Training: losses, gradients the autodiff pass emits, optimizer updates
//===----------------------------------------------------------------------===//

def DS_SoftmaxCrossEntropyOp : DS_Op<"softmax_cross_entropy", [Pure, DS_Differentiable],
                                      DS_OwnStep> {
  let summary = "mean cross entropy of softmax(logits) against class labels";
  let description = [{
    Classes are the last dimension of `logits`; `labels` has the other
    dimensions. The loss is the mean over labels not equal to
    `ignore_index` (torch.nn.CrossEntropyLoss, reduction "mean"); NaN when
    every label is ignored, as in PyTorch.

    **Constraints:**
    - `logits` has rank >= 1 and `labels` has shape `logits.shape[:-1]`.
    - the loss is a scalar of the logits' element type.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$labels,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs DS_FloatTensor:$loss);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_SoftmaxCrossEntropyGradOp : DS_Op<"softmax_cross_entropy_grad", [Pure], DS_OwnStep> {
  let summary = "gradient of softmax_cross_entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * dloss / count` on rows whose
    label is not ignored, zero on ignored rows. With a second result,
    `loss`, it is also `softmax_cross_entropy(logits, labels)` (the same
    value): the loss and its gradient from one pass over the logits,
    folded together by ds-fuse-softmax.

    **Constraints:**
    - `labels` has shape `logits.shape[:-1]`; `dloss` is a scalar.
    - the result has the logits' type; `loss` is a scalar of their element
      type.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$labels,
                   DS_FloatTensor:$dloss, DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs DS_FloatTensor:$result, Optional<DS_FloatTensor>:$loss);
  let assemblyFormat = "$logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_LayerNormGradOp : DS_Op<"layer_norm_grad", [Pure], DS_OwnStep> {
  let summary = "gradients of layer_norm: input, scale and bias";
  let description = [{
    Recomputes the statistics of `operand` and returns `d operand`,
    `d scale` and `d bias` for the output gradient `dy`. With an `addend`,
    `d operand` is `addend + d operand`: the residual stream's gradient a
    pre-norm transformer adds the norm's input gradient to, summed as the
    kernel writes it (folded in by ds-fuse-epilogues).

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
    - `scale` has shape `operand.shape[axis:]`; `dy` and `addend` have the
      operand's type.
    - results: the operand's type, then the scale's type twice.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$scale, DS_FloatTensor:$dy,
                   Optional<DS_FloatTensor>:$addend, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs DS_FloatTensor:$d_operand, DS_FloatTensor:$d_scale,
                  DS_FloatTensor:$d_bias);
  let assemblyFormat = [{
    $operand `,` $scale `,` $dy (`addend` $addend^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SoftmaxGradOp : DS_Op<"softmax_grad",
                             [Pure, AllTypesMatch<["softmax", "dy", "result"]>,
                              DS_OwnShardingRule], DS_OwnStep> {
  let summary = "gradient of softmax from its result: `y * (dy - sum(y * dy))`";
  let description = [{
    The input gradient of `y = softmax(x, axis)` for the output gradient
    `dy`, the sum taken along `axis`: one pass over each row where the
    elementwise form (a product, a reduction and a fused update) is three
    passes over the attention-sized scores. With an i1 `mask` (broadcast
    to `y`), the result is 0 where the mask is true: `where(mask, 0, ...)`,
    the gradient a `masked_fill` passes back, folded in by ds-fuse-softmax.

    **Constraints:**
    - `softmax`, `dy` and the result have one type of rank >= 1; `axis` is
      in [0, rank).
    - `mask`, if present, broadcasts to `softmax`'s shape.
  }];
  let arguments = (ins DS_FloatTensor:$softmax, DS_FloatTensor:$dy,
                   Optional<DS_BoolTensor>:$mask, I64Attr:$axis);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$softmax `,` $dy (`mask` $mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_GeluGradOp : DS_Op<"gelu_grad", [Pure, AllTypesMatch<["operand", "dy", "result"]>,
                                      DS_OwnShardingRule],
                         DS_OwnStep> {
  let summary = "dy * gelu'(x)";
  let description = [{
    **Constraints:**
    - `operand`, `dy` and the result have the same type.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$dy,
                   DefaultValuedAttr<DS_GeluApproximationAttr,
                                     "GeluApproximation::None">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$operand `,` $dy attr-dict `:` type($result)";
}

def DS_GatherGradOp : DS_Op<"gather_grad", [Pure], DS_OwnStep> {
  let summary = "scatter-add of gathered gradients back to the data's shape";
  let description = [{
    The adjoint of `gather` (an embedding's weight gradient): a zero tensor
    of the result type into which each slice of `dy` is added at its index.
    Repeated indices accumulate; slices at `padding_idx` are left out.

    **Constraints:**
    - `axis` is in [0, rank of the result).
    - `dy` has shape `result[:axis] ++ indices.shape ++ result[axis+1:]` and
      the result's element type.
  }];
  let arguments = (ins DS_IndexTensor:$indices, DS_FloatTensor:$dy, I64Attr:$axis,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_InsertSliceOp : DS_Op<"insert_slice", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "a zero tensor with the operand written at a strided window";
  let description = [{
    The adjoint of `slice`: `result[starts + i * steps] = operand[i]`, zero
    elsewhere.

    **Constraints:**
    - `starts` and `steps` have one entry per dimension; steps are non-zero.
    - operand and result have the same rank and element type.
    - every index the operand lands on lies inside the result.
  }];
  let arguments = (ins DS_Tensor:$operand, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_AdamUpdateOp : DS_Op<"adam_update", [Pure, DS_OwnShardingRule, AttrSizedOperandSegments],
                             DS_OwnStep> {
  let summary = "one Adam/AdamW step of a parameter (the fused CPU-Adam kernel)";
  let description = [{
    With `g = grad * grad_scale` (the clipping coefficient): with
    `decoupled` (AdamW) `param *= 1 - lr * weight_decay`, else
    `g += weight_decay * param`; then `m = beta1 m + (1 - beta1) g`,
    `v = beta2 v + (1 - beta2) g^2`, and
    `param -= step_size * m / (sqrt(v) / bias2_sqrt + eps)`, where the
    runtime supplies `step_size = lr / (1 - beta1^t)` and
    `bias2_sqrt = sqrt(1 - beta2^t)` (torch.optim.AdamW's arithmetic).

    With `found_inf` given and not 0 (the gradients overflowed: their norm
    is inf or NaN) the step changes nothing: the results are the operands,
    as an overflowing fp16 step is skipped (DeepSpeed's loss scaler, torch's
    fused optimizers' `found_inf`) and a non-finite fp32 step is refused.

    With `beta1_now` given, the first moment's decay is that scalar instead
    of the `beta1` attribute: a schedule that cycles it (DeepSpeed's
    OneCycle), the runtime's `step_size` using the same value.

    **Constraints:**
    - `param`, `grad`, `m` and `v` have one type; the results are
      `param`, `m` and `v` of that type.
    - `lr`, `step_size`, `bias2_sqrt`, `grad_scale` and `found_inf` are f32
      scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$v, DS_FloatTensor:$lr, DS_FloatTensor:$step_size,
                   DS_FloatTensor:$bias2_sqrt, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf, Optional<DS_FloatTensor>:$beta1_now,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay,
                   BoolAttr:$decoupled);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m, DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step_size `,` $bias2_sqrt `,` $grad_scale
    (`found_inf` $found_inf^)? (`beta1` $beta1_now^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SgdUpdateOp : DS_Op<"sgd_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one SGD step with momentum (torch.optim.SGD)";
  let description = [{
    `d = grad * grad_scale + weight_decay * param`; with momentum
    `buf = first ? d : momentum buf + (1 - dampening) d` and
    `d = nesterov ? d + momentum buf : buf`; `param -= lr d`.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `buf` have one type; the results are `param` and
      `buf` of that type.
    - `lr`, `grad_scale`, `first` (1 on the first step) and `found_inf` are
      f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$buf,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale, DS_FloatTensor:$first,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$momentum, F64Attr:$dampening, BoolAttr:$nesterov,
                   F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr `,` $grad_scale `,` $first
    (`found_inf` $found_inf^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LambUpdateOp : DS_Op<"lamb_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one LAMB step of a whole parameter (DeepSpeed's FusedLamb)";
  let description = [{
    `g = grad * grad_scale`; `m = beta1 m + (1 - beta1) g`,
    `v = beta2 v + (1 - beta2) g^2`; `u = m / (sqrt(v) + eps) + weight_decay
    param` (`sqrt(v + eps)` with `eps_inside_sqrt`; the moments without
    bias correction); the trust ratio `c = clamp(|param| / |u|, min_coeff,
    max_coeff)` over the whole tensor (1 when either norm is 0); then
    `param -= step_size * bias2_sqrt * c * u`, where the runtime supplies
    `step_size = lr / (1 - beta1^t)` and `bias2_sqrt = sqrt(1 - beta2^t)`
    (both plain `lr` and 1 without bias correction).

    The norms are over the operand, so it must be the whole parameter: ZeRO
    partitions and tensor-parallel slices are refused before this op is built.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad`, `m` and `v` have one type; the results are `param`,
      `m` and `v` of that type.
    - `lr`, `step_size`, `bias2_sqrt`, `grad_scale` and `found_inf` are f32
      scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$v, DS_FloatTensor:$lr, DS_FloatTensor:$step_size,
                   DS_FloatTensor:$bias2_sqrt, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay,
                   F64Attr:$max_coeff, F64Attr:$min_coeff, BoolAttr:$eps_inside_sqrt);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m, DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step_size `,` $bias2_sqrt `,` $grad_scale
    (`found_inf` $found_inf^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_MuonUpdateOp : DS_Op<"muon_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Muon step of a whole weight matrix (DeepSpeed's MuonWithAuxAdam)";
  let description = [{
    Momentum orthogonalized by Newton-Schulz, as DeepSpeed 0.19's
    `muon_update`: `g = grad * grad_scale`; `buf = lerp(buf, g, 1 - momentum)`;
    `u = lerp(g, buf, momentum)` with `nesterov`, else `buf`; `O` is `u`
    orthogonalized by `ns_steps` quintic Newton-Schulz iterations
    (coefficients 3.4445, -4.7750, 2.0315; `X = u / (|u|_F + 1e-7)`, on the
    wide orientation: `A = X X^T`, `X = a X + (b A + c A A) X`), computed in
    f32; then `param = param (1 - lr weight_decay) - lr scale O`.

    The matrices: a rank-2 operand is one; rank 4 (a convolution's
    `[O, I, kh, kw]`) is `O x (I kh kw)`, as DeepSpeed views filters; other
    ranks are a batch of their last two dimensions. `scale` is DeepSpeed's
    `sqrt(max(1, rows / cols))` of the layer's `[out, in]` shape, which
    ds-build-train-step reads from how the model uses the weight (ONNX
    stores a MatMul weight as `[in, out]`).

    The norms are over the operand, so it must be the whole parameter: ZeRO
    partitions and tensor-parallel slices are refused before this op is built.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `buf` have one type, of rank >= 2; the results are
      `param` and `buf` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$buf,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$momentum, F64Attr:$weight_decay, BoolAttr:$nesterov,
                   I64Attr:$ns_steps, F64Attr:$scale);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LionUpdateOp : DS_Op<"lion_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Lion step (DeepSpeed's Lion: FusedLion, DeepSpeedCPULion)";
  let description = [{
    `g = grad * grad_scale`; `c = beta1 m + (1 - beta1) g`;
    `param = param (1 - lr weight_decay) - lr sign(c)` (a zero `c` moves
    by `-lr`, as DeepSpeedCPULion's `-copysign(lr, c)` does for +0);
    `m = beta2 m + (1 - beta2) g`. No bias correction, no epsilon.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `m` have one type; the results are `param` and
      `m` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_AdagradUpdateOp : DS_Op<"adagrad_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Adagrad step (torch.optim.Adagrad, DeepSpeedCPUAdagrad)";
  let description = [{
    `g = grad * grad_scale`; `d = g + weight_decay param`;
    `sum += d^2`; `param -= lr n / (sqrt(sum) + eps)` where `n` is `d`
    (torch.optim.Adagrad, what DeepSpeed runs on the device) or, with
    `decay_in_sum_only`, `g` (DeepSpeedCPUAdagrad, what it runs with the
    optimizer offloaded: the decay enters the accumulator only).

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `sum` have one type; the results are `param` and
      `sum` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$sum,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$eps, F64Attr:$weight_decay, BoolAttr:$decay_in_sum_only);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_sum);
  let assemblyFormat = [{
    $param `,` $grad `,` $sum `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Memory spaces: transfers the offload pass inserts (ZeRO-Offload)
//===----------------------------------------------------------------------===//

def DS_OffloadOp : DS_Op<"offload", [Pure, AllTypesMatch<["operand", "result"]>]> {
  let summary = "copies a device tensor to host memory";
  let description = [{
    Device to host: the result lives in host memory, where ops placed on
    the host (`ds.memory_space = #ds<memory_space host>`) read it. ZeRO-
    Offload moves each reduced gradient partition this way before the
    host accumulates it and the host optimizer updates with it. On the CPU
    backend host and device are separate pools of one memory (a copy); on
    CUDA it is a copy over PCIe.

    ```mlir
    %h = ds.offload %g : tensor<1024xf32>
    ```

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def DS_FetchOp : DS_Op<"fetch", [Pure, AllTypesMatch<["operand", "result"]>]> {
  let summary = "copies a host tensor to device memory";
  let description = [{
    Host to device: the inverse of `ds.offload`, e.g. the parameter
    partition the host optimizer updated, on its way to the all-gather.

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Recomputation (ds-recompute)
//===----------------------------------------------------------------------===//

def DS_OptimizationBarrierOp : DS_Op<"optimization_barrier",
    [AllTypesMatch<["operand", "result"]>, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "the operand's value, as a value no pass may merge with it";
  let description = [{
    Returns its operand. It is not `Pure`: CSE never merges it or what is
    computed from it, so a forward segment ds-recompute copies into the
    backward (reading its checkpoint through a barrier) stays a second
    computation instead of folding back into the first, whose
    intermediates would then live through the backward again (StableHLO's
    `optimization_barrier` serves XLA's rematerialization the same way).
    The memory planner makes it a view of its operand; where it cannot
    (the operand is an input or a weight) it is a copy.

    ```mlir
    %h = ds.optimization_barrier %x : tensor<4x16x64xf32>
    ```

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Fused ops (made by the ds-fuse-* passes, not by the importer)
//===----------------------------------------------------------------------===//

def DS_FusedElementwiseOp : DS_Op<"fused_elementwise",
    [Pure, IsolatedFromAbove, SingleBlock, DS_Elementwise],
    DS_OwnStep> {
  let summary = "a chain of elementwise ops evaluated in one pass over memory";
  let description = [{
    The body computes one result element from one element of each input
    (inputs broadcast numpy-style to the result shape). Its ops are ds
    elementwise ops on rank-0 tensors, in the order they ran before
    `ds-fuse-elementwise` grouped them, ending in `ds.yield`. The kernel
    evaluates the body over cache-sized tiles of the result, so the
    intermediates never reach memory; each body op computes in the element
    type it had unfused, so results are what the unfused ops give.

    ```mlir
    %y = ds.fused_elementwise %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<f32>, %h: tensor<f32>):
      %t = ds.tanh %a : tensor<f32>
      %m = ds.mul %t, %h : (tensor<f32>, tensor<f32>) -> tensor<f32>
      ds.yield %m : tensor<f32>
    }
    ```

    **Constraints:**
    - the body has one block whose arguments are rank-0 tensors of the
      inputs' element types, in order.
    - every body op is an elementwise ds op on rank-0 tensors, and there
      is at least one.
    - `ds.yield` yields one rank-0 tensor of the result's element type.
    - every input broadcasts to the result shape.
    - inputs and result are f32 or i1 (what the kernel computes in).
  }];
  let arguments = (ins Variadic<DS_Tensor>:$inputs);
  let results = (outs DS_Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
}

def DS_FusedMatmulOp : DS_Op<"fused_matmul",
    [Pure, AttrSizedOperandSegments], DS_OwnStep> {
  let summary = "a matrix product with the elementwise epilogue that consumed it";
  let description = [{
    `act(alpha * (lhs x rhs) + bias)`, then combined with `addend` (`+`,
    `*`, or with `gelu_grad`/`gelu_tanh_grad` times GELU's derivative at
    `addend`: the backward's `ds.gelu_grad` of the product; with
    `softmax_grad`, `addend` is a softmax's result `y` and the product its
    output gradient: `y * (p - sum(y * p))` per row, `ds.softmax_grad`):
    what a
    `ds.matmul` and the scale, bias add, activation and residual add,
    gating multiply or GELU gradient after it computed, written by the
    product's kernel as it produces each block of the result instead of in
    passes over memory (ds-fuse-matmul-epilogues makes it; the importer
    never does). The product is `ds.matmul`'s, transposed operands
    included; the epilogue runs in f32.

    ```mlir
    %y = ds.fused_matmul %x, %w bias %b addend %res {activation = #ds.activation<gelu_tanh>}
        : (tensor<256x512xf32>, tensor<512x2048xf32>, tensor<2048xf32>, tensor<256x2048xf32>)
        -> tensor<256x2048xf32>
    ```

    `activation` is one of relu, gelu (erf form), gelu_tanh, silu
    (`x * sigmoid(x)`), sigmoid and tanh. An `addend` aliasing the result's
    buffer (a gradient accumulator updated in place) is read before it is
    overwritten. With a second result, `pre_activation`, the product also
    stores `alpha * (lhs x rhs) + bias`, the activation's input: what a
    training backward reads (GELU's gradient), so the activation still
    runs on the block in cache instead of in a pass of its own.

    Row epilogues (attention's scores and their gradient, made by
    ds-fuse-matmul-epilogues from a `ds.masked_softmax`, `ds.softmax` or
    `ds.softmax_grad` over the last axis that only reads the product): with
    `softmax`, each row of `alpha * product` becomes
    `ds.masked_softmax`'s (`mask` i1 with `mask_fill`, or an f32 additive
    `mask`; plain `ds.softmax` without a mask); with `combine =
    softmax_grad`, `ds.softmax_grad`'s with the product as `dy`, 0 where an
    i1 `mask` is set. The row kernels are those ops' own, so the results
    are the same bits; the scores are normalized while the GEMM's block is
    in cache instead of in another pass over memory.

    ```mlir
    %p = ds.fused_matmul %q, %k mask %causal {softmax, mask_fill = 0xFFF0000000000000 : f64,
        alpha = 0.17677669529663687, transpose_rhs = true}
        : (tensor<8x8x128x32xf32>, tensor<8x8x128x32xf32>, tensor<1x1x128x128xi1>)
        -> tensor<8x8x128x128xf32>
    ```

    Strided views (made by ds-fold-matmul-layouts): with `lhs_shape` and
    `lhs_strides` the product's left operand is the `lhs_shape` tensor
    whose element [i0, ..., in] is element `sum(i_d * lhs_strides[d])` of
    `lhs` in row-major order, so a transposed or reshaped operand (attention
    heads split out of [B, T, H*D]) is read where it is instead of copied;
    likewise `rhs_*`. `lhs_offset` / `rhs_offset` start the view further
    into its tensor (the query, key or value piece of a fused QKV
    projection's output, read without the split's copies). With
    `result_shape` and `result_strides` the product
    (of that shape) is written element by element to those offsets of the
    result: the transpose that merges heads back happens as it is stored.

    ```mlir
    // q [B, T, H, D] read as [B, H, T, D]
    %s = ds.fused_matmul %q, %k {lhs_shape = array<i64: 8, 8, 128, 32>,
        lhs_strides = array<i64: 32768, 32, 256, 1>, rhs_shape = array<i64: 8, 8, 32, 128>,
        rhs_strides = array<i64: 32768, 32, 1, 256>, alpha = 0.17677669529663687}
        : (tensor<8x128x8x32xf32>, tensor<8x128x8x32xf32>) -> tensor<8x8x128x128xf32>
    ```

    **Constraints:**
    - `lhs` and `rhs` are f32 and satisfy `ds.matmul`'s constraints with
      the same transposes; the result has `ds.matmul`'s type.
    - `rhs` has rank >= 2 (the epilogue's columns are the result's last
      dimension).
    - `bias`, if present, is f32 [N] (N the result's last dimension).
    - `addend`, if present, has the result's type.
    - `alpha` is finite.
    - A view's shape and strides come together, have the same length (>= 2),
      sizes >= 1 and strides >= 0, and stay inside their tensor from its
      offset (>= 0, only with a view). An operand
      view is not also transposed by its flag, and steps by 1 along one of
      its last two dimensions and by at least the other's extent along the
      other (rows or columns that do not overlap); the result view steps by
      1 along one of its last two dimensions, visits every element of the
      result exactly once, and comes with neither `bias` nor `addend`.
      With views the product's shape is the views' (`result_shape`, or the
      result's type).
    - `softmax` comes with neither `bias`, `activation`, `addend` nor a
      result view; `combine = softmax_grad` with an `addend` and neither
      `bias`, `activation` nor a result view.
    - `mask` comes only with `softmax` (i1 with `mask_fill`, or f32) or
      `softmax_grad` (i1, no `mask_fill`), and broadcasts to the result.
    - `pre_activation` has the result's type and comes with an
      `activation`, and with neither `addend`, row epilogue nor result view.
  }];
  let arguments = (ins DS_F32Tensor:$lhs, DS_F32Tensor:$rhs, Optional<DS_F32Tensor>:$bias,
                   Optional<DS_F32Tensor>:$addend, Optional<DS_Tensor>:$mask,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                   DefaultValuedAttr<DS_ActivationAttr, "Activation::None">:$activation,
                   DefaultValuedAttr<DS_CombineAttr, "Combine::Add">:$combine,
                   OptionalAttr<DenseI64ArrayAttr>:$lhs_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$lhs_strides,
                   OptionalAttr<I64Attr>:$lhs_offset,
                   OptionalAttr<DenseI64ArrayAttr>:$rhs_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$rhs_strides,
                   OptionalAttr<I64Attr>:$rhs_offset,
                   OptionalAttr<DenseI64ArrayAttr>:$result_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$result_strides,
                   UnitAttr:$softmax, OptionalAttr<F64Attr>:$mask_fill);
  let results = (outs DS_F32Tensor:$result, Optional<DS_F32Tensor>:$pre_activation);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? (`addend` $addend^)? (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_DynamicQuantizeOp : DS_Op<"dynamic_quantize", [Pure], DS_OwnStep> {
  let summary = "ONNX DynamicQuantizeLinear: uint8 values, their scale and zero point";
  let description = [{
    The whole operand quantized to uint8: `scale = (max(x, 0) - min(x, 0))
    / 255`, `zero_point = saturate(round(-min(x, 0) / scale))` and
    `y = saturate(round(x / scale) + zero_point)`, rounding half to even
    (0 everywhere, with scale 0, for an all-zero operand). In one pass
    where the ops it is made of take several; what onnxruntime's
    quantize_dynamic puts before each MatMulInteger, which
    ds-raise-quantized-matmul folds into `ds.quantized_matmul`.

    ```mlir
    %q, %s, %z = ds.dynamic_quantize %x : (tensor<512x256xf32>) -> (tensor<512x256xui8>, tensor<f32>, tensor<ui8>)
    ```

    **Constraints:**
    - the operand is f32; `y` is ui8 of its shape, `scale` an f32 scalar
      and `zero_point` a ui8 scalar.
  }];
  let arguments = (ins DS_F32Tensor:$operand);
  let results = (outs StaticShapeTensorOf<[UI8]>:$y, 0DTensorOf<[F32]>:$scale,
                 0DTensorOf<[UI8]>:$zero_point);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_QuantizedMatmulOp : DS_Op<"quantized_matmul", [Pure, AttrSizedOperandSegments],
                                 DS_OwnStep> {
  let summary = "a product with an int8 or int4 weight, and fused_matmul's epilogue";
  let description = [{
    `act(alpha * (x' x W^T) + bias)`, then `+` or `*` the `addend`, where the
    weight `W` is [N, K] (output channels first, each channel's K values
    contiguous) and stored quantized:
    `W[n, k] = (weight[n, k] - zero_point[n, g]) * scale[n, g]`, `g = k /
    group_size` (`group_size` 0: one scale per output channel, `scale` [N];
    otherwise `scale` [N, K / group_size]). With `bits = 8` the weight is
    i8 [N, K]; with `bits = 4` it is ui8 [N, K / 2] holding two values a
    byte, `k` even in the low nibble, each 0..15 with the zero point 8
    unless `zero_point` gives others (ui8, `scale`'s shape).

    `activation_quant` says what `x'` is: `x` itself (`none`, weight-only
    quantization: ZeroQuant's and onnxruntime-genai's int4), each row of
    `x` rounded to int8 with its own scale `s = max|x_row| / 127` (`x *
    (1 / s)` rounded half to even; `dynamic_per_row`: DeepSpeed's and ds-opt --quantize int8-dynamic's
    activations), or all of `x` rounded to uint8 with ONNX
    DynamicQuantizeLinear's scale and zero point (`dynamic_per_tensor`:
    onnxruntime's quantize_dynamic). With quantized activations the
    product is of integers: CPUs with int8 dot-product instructions (VNNI,
    AMX) run it there. ds-quantize makes this op from products with
    constant f32 weights.

    ```mlir
    %y = ds.quantized_matmul %x, %w, %s bias %b {activation_quant = #ds<activation_quant dynamic_per_row>, bits = 8 : i64}
        : (tensor<8x768xf32>, tensor<3072x768xi8>, tensor<3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    ```

    **Constraints:**
    - `lhs` is f32 [..., M, K]; the result is f32 [..., M, N].
    - `bits` is 8 with an i8 `weight` [N, K], or 4 with a ui8 `weight`
      [N, K / 2] (K even).
    - `group_size` is 0, or divides K (and is even with `bits = 4`);
      `scale` is f32 [N] (group_size 0) or [N, K / group_size].
    - `zero_point`, if present, has `scale`'s shape and the weight's type
      (ui8 for 4 bits); `dynamic_per_row` and `dynamic_per_tensor` take
      none.
    - `bias`, if present, is f32 [N]; `addend`, if present, has the
      result's type.
    - `combine` is `add` or `mul`; `alpha` is finite.
  }];
  let arguments = (ins DS_F32Tensor:$lhs, StaticShapeTensorOf<[I8, UI8]>:$weight,
                   DS_F32Tensor:$scale, Optional<StaticShapeTensorOf<[I8, UI8]>>:$zero_point,
                   Optional<DS_F32Tensor>:$bias, Optional<DS_F32Tensor>:$addend,
                   DefaultValuedAttr<I64Attr, "8">:$bits,
                   DefaultValuedAttr<I64Attr, "0">:$group_size,
                   DefaultValuedAttr<DS_ActivationQuantAttr, "ActivationQuant::None">:$activation_quant,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                   DefaultValuedAttr<DS_ActivationAttr, "Activation::None">:$activation,
                   DefaultValuedAttr<DS_CombineAttr, "Combine::Add">:$combine);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $weight `,` $scale (`zero_point` $zero_point^)? (`bias` $bias^)? (`addend` $addend^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_RmsNormOp : DS_Op<"rms_norm", [Pure, AllTypesMatch<["operand", "result"]>],
                          DS_OwnStep> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale`, the mean over the last
    dimension (Llama's RMSNorm, `torch.nn.RMSNorm`), in one pass per row.
    Exporters write it as five to seven ops; ds-fuse-norms makes this op
    from them.

    ```mlir
    %y = ds.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : (tensor<1x256x512xf32>, tensor<512xf32>) -> tensor<1x256x512xf32>
    ```

    **Constraints:**
    - the operand is f32 of rank >= 1.
    - `scale`, if present, is [N], N the operand's last dimension.
    - `epsilon` is finite and >= 0.
  }];
  let arguments = (ins DS_F32Tensor:$operand, Optional<DS_F32Tensor>:$scale, F32Attr:$epsilon);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = [{
    $operand (`,` $scale^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SumSquaresOp : DS_Op<"sum_squares", [Pure]> {
  let summary = "the sum of the squares of every element of every operand";
  let description = [{
    `sum_i sum_j x_i[j]^2`: the squared global gradient norm of
    `clip_grad_norm_`, over all gradients in one pass that reads each once
    (ds-fuse-optimizer makes it from the multiply, reduction and add per
    gradient the optimizer step is built from). The kernel sums fixed-size
    chunks in f32 lanes and the chunks in f64, so the result does not
    depend on the thread count.

    ```mlir
    %s = ds.sum_squares %g0, %g1 : (tensor<256x768xf32>, tensor<768xf32>) -> tensor<f32>
    ```

    **Constraints:**
    - at least one operand; operands are f32.
    - the result is an f32 scalar.
  }];
  let arguments = (ins Variadic<DS_F32Tensor>:$operands);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_AttentionOp : DS_Op<"attention", [Pure], DS_OwnStep> {
  let summary = "scaled dot-product attention over heads, reading q, k and v as strided views";
  let description = [{
    For each batch b, query head h and query row i:
    `out[b, h, i] = sum_j p_j v[b, g, j]` with
    `p = softmax_j(scale * q[b, h, i] . k[b, g, j] + mask[b, h, i, j])` and
    `g = h / (Hq / Hkv)`: several query heads share one key/value head
    (grouped-query attention; Hkv = Hq is multi-head attention).
    ds-fuse-attention makes it from the products, scale, mask add and
    softmax an exporter writes; its kernel works on blocks of query rows
    and keys with an online softmax (FlashAttention's recurrence), so the
    [Sq, Sk] score matrix of a head is never in memory at once.

    Each of `query`, `key`, `value` is the tensor in memory, read through a
    view: `*_shape` is the logical [B, heads, length, dim] and `*_strides`
    the element strides into the operand for it, so the transposes,
    reshapes and head broadcasts that fed the products are folded into the
    indexing. `*_offset` starts a view further into its operand: q, k and
    v that one projection made and a split cut apart are read where the
    projection wrote them, and the split goes. `result_bshd` writes the
    result [B, Sq, Hq, Dv] (the layout
    the output projection reads) instead of [B, Hq, Sq, Dv]. `mask` is
    broadcast to [B, Hq, Sq, Sk]: added to the scores, or with `mask_fill`
    a boolean selecting the scores replaced by that value (`masked_fill`,
    exported as `where(mask, fill, scores)`). A row whose softmax is not a
    number (every score -inf, or a NaN) is NaN, or 0 with `zero_nan_rows`
    (the `where(isnan(p), 0, p)` PyTorch 2 exports after the softmax).

    ```mlir
    %o = ds.attention %qkv, %qkv, %qkv {query_shape = array<i64: 2, 8, 128, 64>, ...}
        : (tensor<2x128x1536xf32>, tensor<2x128x1536xf32>, tensor<2x128x1536xf32>) -> tensor<2x128x8x64xf32>
    ```

    **Constraints:**
    - `query_shape` is [B, Hq, Sq, D], `key_shape` [B, Hkv, Sk, D],
      `value_shape` [B, Hkv, Sk, Dv], all sizes >= 1, and Hkv divides Hq.
    - each `*_strides` has 4 non-negative entries, one of the last two is
      1, and the view (from `*_offset`, >= 0, if given) stays inside its
      operand.
    - the result is [B, Hq, Sq, Dv], or [B, Sq, Hq, Dv] with `result_bshd`.
    - `mask`, if present, broadcasts to [B, Hq, Sq, Sk]; it is i1 with
      `mask_fill`, else f32, and `mask_fill` needs a mask.
    - `scale` is finite.
  }];
  let arguments = (ins DS_F32Tensor:$query, DS_F32Tensor:$key, DS_F32Tensor:$value,
                   Optional<DS_Tensor>:$mask, OptionalAttr<F64Attr>:$mask_fill,
                   DenseI64ArrayAttr:$query_shape, DenseI64ArrayAttr:$query_strides,
                   DenseI64ArrayAttr:$key_shape, DenseI64ArrayAttr:$key_strides,
                   DenseI64ArrayAttr:$value_shape, DenseI64ArrayAttr:$value_strides,
                   OptionalAttr<I64Attr>:$query_offset, OptionalAttr<I64Attr>:$key_offset,
                   OptionalAttr<I64Attr>:$value_offset,
                   F64Attr:$scale, UnitAttr:$zero_nan_rows, UnitAttr:$result_bshd);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_CachedAttentionOp : DS_Op<"cached_attention", [Pure], DS_OwnStep> {
  let summary = "causal attention of a chunk of tokens against a key/value cache, appending to it";
  let description = [{
    One step of generation (ds-derive-generation makes it from a causal
    `ds.attention`). Row `b` of the batch holds `lengths[b]` new tokens
    (`0 <= lengths[b] <= T`) at positions `positions[b]`,
    `positions[b] + 1`, ... of the sequence kept in cache slot `slots[b]`.
    First the new keys and values are written into the caches: for
    `t < lengths[b]`,
    key `j = positions[b] + t` goes to
    `key_cache[slots[b], g, j / 16, :, j % 16] = key[b, g, t]` and
    `value_cache[slots[b], g, j] = value[b, g, t]` (keys are stored in
    tiles of 16, transposed: a query's scores against a tile's keys are
    vector products over one contiguous block of memory). Then query row `t` of head `h` attends to the cached
    keys `j` with `lo <= j <= positions[b] + t` of key/value head
    `g = h / (Hq / Hkv)` (grouped-query attention), where `lo` is 0, or
    `positions[b] + t - window + 1` with a sliding `window`:
    `softmax_j(scale * q . k_j) v_j`. Rows `t >= lengths[b]` are 0 and
    write nothing. The results `key_cache_out`, `value_cache_out` are the
    updated caches; ds-plan-memory gives them the caches' own bytes (a
    global's state buffer), so only the new rows are written.

    `query`, `key` and `value` are read through strided views as
    `ds.attention` reads them: `*_shape` is [B, heads, T, dim] and
    `*_strides` the element strides into the operand; `*_offset` starts a
    view further in. `result_bshd` writes the result [B, T, Hq, Dv] instead
    of [B, Hq, T, Dv].

    ```mlir
    %o, %kc, %vc = ds.cached_attention %q, %k, %v, %kcache, %vcache, %pos, %len, %slot
        {query_shape = array<i64: 1, 8, 1, 64>, ..., scale = 0.125 : f64}
        : (tensor<1x1x512xf32>, tensor<1x1x512xf32>, tensor<1x1x512xf32>,
           tensor<1x8x128x64x16xf32>, tensor<1x8x2048x64xf32>, tensor<1xi64>, tensor<1xi64>,
           tensor<1xi64>)
        -> (tensor<1x8x1x64xf32>, tensor<1x8x128x64x16xf32>, tensor<1x8x2048x64xf32>)
    ```

    **Constraints:**
    - `query_shape` is [B, Hq, T, D], `key_shape` [B, Hkv, T, D],
      `value_shape` [B, Hkv, T, Dv], all sizes >= 1, and Hkv divides Hq.
    - each `*_strides` has 4 non-negative entries, one of the last two is
      1, and the view (from `*_offset`, >= 0, if given) stays inside its
      operand.
    - `key_cache` is [Bc, Hkv, M / 16, D, 16] and `value_cache`
      [Bc, Hkv, M, Dv] with M >= T; `key_cache_out` and `value_cache_out` have the caches'
      types.
    - `positions`, `lengths` and `slots` are i64 [B].
    - the result is [B, Hq, T, Dv], or [B, T, Hq, Dv] with `result_bshd`.
    - `scale` is finite; `window`, if given, is >= 1.
  }];
  let arguments = (ins DS_F32Tensor:$query, DS_F32Tensor:$key, DS_F32Tensor:$value,
                   DS_F32Tensor:$key_cache, DS_F32Tensor:$value_cache,
                   DS_I64Tensor:$positions, DS_I64Tensor:$lengths, DS_I64Tensor:$slots,
                   DenseI64ArrayAttr:$query_shape, DenseI64ArrayAttr:$query_strides,
                   DenseI64ArrayAttr:$key_shape, DenseI64ArrayAttr:$key_strides,
                   DenseI64ArrayAttr:$value_shape, DenseI64ArrayAttr:$value_strides,
                   OptionalAttr<I64Attr>:$query_offset, OptionalAttr<I64Attr>:$key_offset,
                   OptionalAttr<I64Attr>:$value_offset,
                   F64Attr:$scale, OptionalAttr<I64Attr>:$window, UnitAttr:$result_bshd);
  let results = (outs DS_F32Tensor:$result, DS_F32Tensor:$key_cache_out,
                 DS_F32Tensor:$value_cache_out);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $key_cache `,` $value_cache `,` $positions `,` $lengths `,`
    $slots attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_YieldOp : Op<DS_Dialect, "yield",
    [Pure, Terminator, HasParent<"FusedElementwiseOp">]> {
  let summary = "the value a fused body computes";
  let description = [{
    Ends the body of `ds.fused_elementwise` with the element it computes.

    **Constraints:**
    - exactly one operand, a rank-0 tensor (checked by the parent).
  }];
  let arguments = (ins DS_Tensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // DS_OPS_TD
