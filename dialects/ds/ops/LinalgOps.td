//===- LinalgOps.td - ds dialect ops -----------------------*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). This family's op facts are in
// LinalgOps.cpp beside this file.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_LINALG_OPS_TD
#define DS_OPS_LINALG_OPS_TD

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

#endif // DS_OPS_LINALG_OPS_TD
