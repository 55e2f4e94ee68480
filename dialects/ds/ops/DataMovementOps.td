//===- DataMovementOps.td - ds dialect ops -----------------*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). This family's op facts are in
// DataMovementOps.cpp beside this file.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_DATA_MOVEMENT_OPS_TD
#define DS_OPS_DATA_MOVEMENT_OPS_TD

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

def DS_ResampleOp : DS_Op<"resample", [Pure], DS_OwnStep> {
  let summary = "separable resampling of one or two axes by tap tables (an inference Resize)";
  let description = [{
    Output position `o` of resampled axis `a` is the weighted sum of
    `taps[a]` input positions: `index[a][o][t]` with weight
    `weight[a][o][t]`; with two axes the weights multiply. The importer
    computes the tables from Resize's mode, coordinate transformation and
    rounding (lib/Import/ResizeOps.cpp), so one kernel serves nearest,
    linear and cubic, upsampling and antialiased downsampling, in any
    layout: channels-last data (`axes = [1, 2]` of [N, H, W, C]) blends
    whole pixel vectors. `index` and `weight` hold the axes' tables one
    after the other, `[out_a, taps_a]` row-major each. Training plans
    import Resize as gathers and products instead, which have gradients.

    ```mlir
    %y = ds.resample %x, %idx, %w {axes = array<i64: 2, 3>, taps = array<i64: 2, 2>} : (tensor<1x8x16x16xf32>, tensor<128xi64>, tensor<128xf32>) -> tensor<1x8x32x32xf32>
    ```

    **Constraints:**
    - one or two increasing `axes`, each with a positive tap count in `taps`;
    - `index` and `weight` have `sum(result.shape[a] * taps[a])` elements;
    - the result has the operand's shape except on `axes`.
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$operand, 1DTensorOf<[I64]>:$index,
                       1DTensorOf<[F32]>:$weight, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$taps);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "$operand `,` $index `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
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

#endif // DS_OPS_DATA_MOVEMENT_OPS_TD
