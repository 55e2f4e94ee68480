//===- FusedOps.td - ds dialect ops ------------------------*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). Each fused op's facts sit with its
// unfused family's (ops/ElementwiseOps.cpp, LinalgOps.cpp,
// NormalizationOps.cpp); its verifier in DSOps.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_FUSED_OPS_TD
#define DS_OPS_FUSED_OPS_TD

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
    onnxruntime's quantize_dynamic), or all of `x` rounded to uint8 with the
    fixed `input_scale` and `input_zero_point` (`static_per_tensor`: a QDQ
    model's QuantizeLinear, `q = clamp(round_half_even(x / input_scale) +
    input_zero_point, 0, 255)`, `x' = (q - input_zero_point) *
    input_scale`; an int8 QuantizeLinear is the same with its zero point
    plus 128). With quantized activations the
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
      (ui8 for 4 bits); quantized activations take none.
    - `input_scale` (positive, finite) and `input_zero_point` (0 to 255)
      are present exactly with `static_per_tensor`.
    - `round_scale` and `round_zero_point`, if present (together; the
      same ranges), round the result to that uint8 grid and back as it is
      stored (a QDQ model's QuantizeLinear/DequantizeLinear after the
      product: `ds.fake_quantize`, which ds-fuse-matmul-epilogues folds in).
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
                   DefaultValuedAttr<DS_CombineAttr, "Combine::Add">:$combine,
                   OptionalAttr<F64Attr>:$input_scale,
                   OptionalAttr<I64Attr>:$input_zero_point,
                   OptionalAttr<F64Attr>:$round_scale,
                   OptionalAttr<I64Attr>:$round_zero_point);
  let results = (outs DS_F32Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $weight `,` $scale (`zero_point` $zero_point^)? (`bias` $bias^)? (`addend` $addend^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_QuantizedConvOp : DS_Op<"quantized_conv", [Pure, AttrSizedOperandSegments], DS_OwnStep> {
  let summary = "a convolution of uint8-quantized activations and an int8 weight, ds.conv's epilogue";
  let description = [{
    `clamp(conv(x', W) + bias + addend)` with ds.conv's geometry, where
    the activations are quantized with a scale and zero point fixed at
    compile time, `q = clamp(round_half_even(x / input_scale) +
    input_zero_point, 0, 255)`, `x' = (q - input_zero_point) *
    input_scale`, and the weight [M, C/group, k...] is int8 with one scale
    per output channel: `W[m, ...] = weight[m, ...] * scale[m]`. The padding
    is of real zeros (`q = input_zero_point`), as in ONNX QLinearConv. The
    sums of `q - input_zero_point` times the weight are exact integers:
    CPUs with int8 dot products (VNNI, AMX) run them there.
    ds-raise-quantized-matmul makes this op from a QDQ model's
    DequantizeLinear(QuantizeLinear(x)) feeding a Conv whose weight is an
    int8 DequantizeLinear (onnxruntime's quantize_static), and from
    QLinearConv.

    Activations may stay quantized between convolutions
    (ds-keep-activations-quantized): a ui8 `input` is `q` itself (rounded
    with `input_scale` and `input_zero_point` by its producer), and a ui8
    result is the f32 result rounded the same way with `output_scale` and
    `output_zero_point`, `clamp(round_half_even(y / output_scale) +
    output_zero_point, 0, 255)`: a quarter of the bytes between layers.

    ```mlir
    %y = ds.quantized_conv %x, %w, %s bias %b {input_scale = 0.02 : f64, input_zero_point = 128 : i64,
             strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,
             group = 1 : i64}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    ```

    **Constraints:**
    - `input` is f32 or ui8 and `weight` i8 of the same rank >= 3, with
      ds.conv's geometry (strides, dilations, pads, group, channels_last).
    - the result is f32, or ui8 with `output_scale` (positive, finite) and
      `output_zero_point` (0 to 255) and neither `addend` nor `hard_swish`.
    - `scale` and `bias` (if present) are f32 [M]; `addend`, if present,
      has the result's type.
    - `input_scale` is positive and finite; `input_zero_point` is in
      [0, 255].
    - `clip_min` <= `clip_max`; `activation` is `none` or `hard_swish`.
  }];
  let arguments = (ins StaticShapeTensorOf<[F32, UI8]>:$input, StaticShapeTensorOf<[I8]>:$weight,
                   DS_F32Tensor:$scale, Optional<DS_F32Tensor>:$bias,
                   Optional<DS_F32Tensor>:$addend,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$pads, I64Attr:$group,
                   F64Attr:$input_scale, I64Attr:$input_zero_point,
                   OptionalAttr<F64Attr>:$clip_min, OptionalAttr<F64Attr>:$clip_max,
                   UnitAttr:$channels_last,
                   DefaultValuedAttr<DS_ActivationAttr, "Activation::None">:$activation,
                   OptionalAttr<F64Attr>:$output_scale,
                   OptionalAttr<I64Attr>:$output_zero_point);
  let results = (outs StaticShapeTensorOf<[F32, UI8]>:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $scale (`bias` $bias^)? (`addend` $addend^)?
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

#endif // DS_OPS_FUSED_OPS_TD
