//===- ReductionOps.td - ds dialect ops --------------------*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). This family's op facts are in
// ReductionOps.cpp and NormalizationOps.cpp beside this file.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_REDUCTION_OPS_TD
#define DS_OPS_REDUCTION_OPS_TD

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

#endif // DS_OPS_REDUCTION_OPS_TD
