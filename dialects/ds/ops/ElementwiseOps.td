//===- ElementwiseOps.td - ds dialect ops ---*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). This family's op facts are in
// ElementwiseOps.cpp beside this file.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_ELEMENTWISE_OPS_TD
#define DS_OPS_ELEMENTWISE_OPS_TD

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

def DS_FakeQuantizeOp : DS_Op<"fake_quantize", [Pure, SameOperandsAndResultType, DS_Elementwise],
                               DS_OwnStep> {
  let summary = "x rounded to uint8 and back: QuantizeLinear then DequantizeLinear";
  let description = [{
    `(clamp(round_half_even(x / scale) + zero_point, 0, 255) - zero_point)
    * scale`: the values a QDQ model's QuantizeLinear/DequantizeLinear pair
    hands on (an int8 pair is the same with its zero point plus 128).
    ds-raise-quantized-matmul makes it of the pairs no int8 kernel takes
    (before a residual add, a pooling), so that ds-fuse-elementwise fuses
    one op, not seven. NaN rounds to what the clamp makes of it.

    ```mlir
    %y = ds.fake_quantize %x {scale = 0.02 : f64, zero_point = 128 : i64} : tensor<1x64x56x56xf32>
    ```

    **Constraints:**
    - operand and result have the same f32 tensor type.
    - `scale` is positive and finite (as an f32); `zero_point` is in
      [0, 255].
  }];
  let arguments = (ins DS_F32Tensor:$operand, F64Attr:$scale, I64Attr:$zero_point);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
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
                                DS_Differentiable], DS_OwnStep> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float to integer conversion truncates toward zero and saturates; any
    non-zero value converts to `true` (i1). Conversion to a 4- or 2-bit
    integer keeps the low bits of the integer value (ONNX's wrap-around).

    Conversion to a narrow float rounds to nearest even. `saturate` (ONNX
    Cast-19's attribute; absent means true) decides what a value beyond the
    type's largest finite one becomes: that largest value, or infinity (NaN
    for the float8 types without one). float4 (e2m1) always saturates.
    Conversion to f8E8M0FNU (a power of two) rounds as `round_mode` says:
    "up" (the default), "down" or "nearest".

    **Constraints:**
    - operand and result have the same shape.
  }];
  let arguments = (ins DS_Tensor:$operand, OptionalAttr<BoolAttr>:$saturate,
                       OptionalAttr<StrAttr>:$round_mode);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
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

#endif // DS_OPS_ELEMENTWISE_OPS_TD
