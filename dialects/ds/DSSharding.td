//===- DSSharding.td - mesh, shardings and collectives -----*- tablegen -*-===//
//
// Placement as Shardy/GSPMD represent it: a module-level mesh of named axes
// (`ds.mesh` on the module), a sharding per value (`ds.sharding` on the op
// or argument that defines it) saying which mesh axes split each dimension
// and over which axes the value is an unreduced partial sum, and
// collectives over mesh axes. MLIR 22's upstream `shard` dialect has
// numbered (not named) grid axes and no partial sums in its shardings, and
// its collectives assume its own partition pass; docs/dialects/sharding.md
// says why ds keeps its own and how the two map.
//
// Shapes: before ds-global-to-local the IR is the global view and a
// collective's result has its operand's shape (only the sharding changes);
// after it the enclosing function carries `ds.spmd` and every type is one
// rank's slice, so an all_gather's result is its operand times the group.
//
//===----------------------------------------------------------------------===//
#ifndef DS_SHARDING_TD
#define DS_SHARDING_TD

include "dialects/ds/DSDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def DS_MeshAxisAttr : AttrDef<DS_Dialect, "MeshAxis"> {
  let mnemonic = "axis";
  let summary = "a named axis of the device mesh and its size";
  let parameters = (ins StringRefParameter<"axis name">:$name, "int64_t":$size);
  let assemblyFormat = "`<` $name `=` $size `>`";
  let genVerifyDecl = 1;
}

def DS_MeshAttr : AttrDef<DS_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "the device mesh: named axes, ranks in row-major order";
  let description = [{
    `#ds.mesh<[<"dp" = 2>, <"tp" = 4>]>`: 8 ranks; rank r
    has coordinates r in row-major order (the last axis varies fastest, so
    the ranks of one `tp` group are adjacent, as Megatron lays them out).
  }];
  let parameters = (ins ArrayRefParameter<"MeshAxisAttr", "mesh axes">:$axes);
  let assemblyFormat = "`<` `[` $axes `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Ranks in the mesh.
    int64_t getNumRanks() const;
    /// The size of axis `name`, if the mesh has it.
    std::optional<int64_t> getAxisSize(StringRef name) const;
    /// The mesh of the module around `op` (its `ds.mesh` attribute).
    static MeshAttr lookup(Operation *op);
  }];
}

def DS_ShardingAttr : AttrDef<DS_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is laid over the mesh";
  let description = [{
    `dims` has one list of mesh axis names per tensor dimension: the axes
    that split it (major to minor); an empty list is not split. `partial`
    names axes over which the value is an unreduced partial sum (a
    row-parallel matmul's output before its all_reduce). Every axis appears
    at most once. `#ds.sharding<[[], []]>` is replicated. `outer` (one
    entry per dimension, default 1) views a dimension of extent D as
    [outer, D / outer] and splits only the second factor into blocks: the
    merged (batch * heads) dimension of an attention whose heads are split
    has outer = batch.

    ```mlir
    %w = ds.shard %p {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<64x256xf32>
    %y = ds.matmul %h, %w2 {ds.sharding = #ds.sharding<[[], []], partial = ["tp"]>} : ...
    ```
  }];
  let parameters = (ins "ArrayAttr":$dims, OptionalParameter<"ArrayAttr">:$partial,
                        OptionalParameter<"DenseI64ArrayAttr">:$outer);
  let assemblyFormat = "`<` $dims (`,` `partial` `=` $partial^)? (`,` `outer` `=` $outer^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static ShardingAttr replicated(MLIRContext *ctx, int64_t rank);
    static ShardingAttr get(MLIRContext *ctx, ArrayRef<SmallVector<StringRef>> dims,
                            ArrayRef<StringRef> partial = {}, ArrayRef<int64_t> outer = {});
    /// Dimension `d`'s outer factor (1: plain blocks).
    int64_t outerOf(int64_t d) const { return getOuter() ? getOuter()[d] : 1; }
    int64_t getRank() const { return getDims().size(); }
    /// The axes splitting dimension `d`.
    SmallVector<StringRef> axesOf(int64_t d) const;
    SmallVector<StringRef> partialAxes() const;
    bool isPartial() const { return getPartial() && !getPartial().empty(); }
    bool isReplicated() const;
    /// This sharding without partial axes.
    ShardingAttr withoutPartial() const;
    /// Dimension `d`'s extent on one rank, or failure when the axes' sizes
    /// do not divide `extent`.
    FailureOr<int64_t> localExtent(int64_t d, int64_t extent, MeshAttr mesh) const;
  }];
}

def DS_CollectiveReduction : I32EnumAttr<"CollectiveReduction",
    "how a collective combines the ranks' values", [
      I32EnumAttrCase<"Sum", 0, "sum">, I32EnumAttrCase<"Max", 1, "max">,
      I32EnumAttrCase<"Min", 2, "min">, I32EnumAttrCase<"Prod", 3, "prod">
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_CollectiveReductionAttr : EnumAttr<DS_Dialect, DS_CollectiveReduction, "reduction">;

// ---- ops ---------------------------------------------------------------------

def DS_ShardOp : DS_Op<"shard", [Pure, SameOperandsAndResultType, DS_Differentiable]> {
  let summary = "a sharding constraint: the result is laid out as given";
  let description = [{
    Says where a value must live (Shardy's sharding_constraint): the
    tensor-parallel pass puts one on each weight it splits. ds-reshard turns
    it into the collective (or local slice) that moves the operand's
    sharding to `sharding`, or into nothing when they agree. Its gradient
    is the result's (the value is the operand's); in a training module a
    constraint on a parameter's load also lays out the parameter's state
    (ds-propagate-sharding).

    **Constraints:**
    - `sharding` has the operand's rank and names axes of the module's mesh.
  }];
  let arguments = (ins DS_Tensor:$operand, DS_ShardingAttr:$sharding);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Collectives are not Pure: CSE must not merge ZeRO-3's gather before a
// backward use with the forward's (the gathered parameter would live from
// forward to backward), and every rank must issue the same sequence.
class DS_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : DS_Op<mnemonic, traits # [MemoryEffects<[MemRead, MemWrite]>], DS_OwnStep> {
  code commonConstraints = [{
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
  }];
}

def DS_AllReduceOp : DS_CollectiveOp<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "every rank of the group gets the reduction of all ranks' values";
  let description = [{
    Turns a partial sum over `axes` into the full value on every rank.

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
  }];
  let arguments = (ins DS_NumericTensor:$operand, StrArrayAttr:$axes,
                   DefaultValuedAttr<DS_CollectiveReductionAttr,
                                     "CollectiveReduction::Sum">:$reduction);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_AllGatherOp : DS_CollectiveOp<"all_gather"> {
  let summary = "concatenates the group's slices along a dimension";
  let description = [{
    Undoes a split of `dim` over `axes`: every rank gets the whole
    dimension, rank i's slice at block i.

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - `dim` is a dimension of the operand; the element types agree.
    - `outer` >= 1 (`dim` is viewed as [outer, extent / outer] and the
      blocks are of the second factor, as in a sharding's `outer`).
    - global view: the shapes agree and `dim` divides by outer times the group size;
      `ds.spmd`: the result's `dim` is the operand's times the group size.

    `quantize_block` (ZeRO++'s qwZ, set by ds-schedule-zero on stage 3's
    parameter gathers): each rank sends its float slice as int8 in blocks
    of that many elements, each with an f32 scale (symmetric, absmax / 127),
    and every rank dequantizes what it receives: about a quarter of the
    bytes of f32. The values gathered are then within half a step
    (absmax / 254) of each block's own.
    - with `quantize_block`: a float element type, `outer` 1, the block > 0.
  }];
  let arguments = (ins DS_Tensor:$operand, StrArrayAttr:$axes, I64Attr:$dim,
                   DefaultValuedAttr<I64Attr, "1">:$outer,
                   OptionalAttr<I64Attr>:$quantize_block);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_ReduceScatterOp : DS_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces over the group and leaves rank i block i of a dimension";
  let description = [{
    A partial sum over `axes` becomes the full value split along `dim`:
    half the traffic of an all_reduce (ZeRO-2's gradient reduction).

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - `dim` is a dimension of the operand; the element types agree.
    - `outer` >= 1 (`dim` is viewed as [outer, extent / outer] and the
      blocks are of the second factor, as in a sharding's `outer`).
    - global view: the shapes agree and `dim` divides by outer times the group size;
      `ds.spmd`: the result's `dim` is the operand's divided by the group size.

    `quantize_block` (ZeRO++'s qgZ, set by ds-schedule-zero on the
    gradient reductions of the training step): each rank sends every other
    rank's block as int8 in blocks of that many elements with an f32 scale
    each (symmetric, absmax / 127), one all-to-all, and sums what it
    receives in f32: about a quarter of the bytes of f32.
    - with `quantize_block`: an f32, f16 or bf16 operand, `outer` 1, the
      block > 0, a sum.
  }];
  let arguments = (ins DS_NumericTensor:$operand, StrArrayAttr:$axes, I64Attr:$dim,
                   DefaultValuedAttr<I64Attr, "1">:$outer,
                   DefaultValuedAttr<DS_CollectiveReductionAttr,
                                     "CollectiveReduction::Sum">:$reduction,
                   OptionalAttr<I64Attr>:$quantize_block);
  let results = (outs DS_NumericTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_ShardSliceOp : DS_CollectiveOp<"shard_slice"> {
  let summary = "each rank keeps its block of a dimension (no communication)";
  let description = [{
    A replicated value becomes split along `dim` over `axes`: rank i of the
    group keeps block i. Of a parameter, the plan stores each rank's block
    as that rank's weight shard instead of slicing at run time.

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - `dim` is a dimension of the operand; the element types agree.
    - `outer` >= 1 (`dim` is viewed as [outer, extent / outer] and the
      blocks are of the second factor, as in a sharding's `outer`).
    - global view: the shapes agree and `dim` divides by outer times the group size;
      `ds.spmd`: the result's `dim` is the operand's divided by the group size.
  }];
  let arguments = (ins DS_Tensor:$operand, StrArrayAttr:$axes, I64Attr:$dim,
                   DefaultValuedAttr<I64Attr, "1">:$outer);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_BroadcastOp : DS_CollectiveOp<"broadcast", [SameOperandsAndResultType]> {
  let summary = "every rank of the group gets rank `root`'s value";
  let description = [{
    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - `root` is a rank of the group.
  }];
  let arguments = (ins DS_Tensor:$operand, StrArrayAttr:$axes,
                   DefaultValuedAttr<I64Attr, "0">:$root);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_AllToAllOp : DS_CollectiveOp<"all_to_all"> {
  let summary = "re-splits a tensor from one dimension to another";
  let description = [{
    Rank i sends block j of `split_dim` to rank j and concatenates what it
    receives along `concat_dim` (sequence <-> head parallelism, MoE).

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - `split_dim` and `concat_dim` are dimensions of the operand; element types agree.
    - global view: the shapes agree and `split_dim` divides by the group size;
      `ds.spmd`: `split_dim` shrinks and `concat_dim` grows by the group size.
  }];
  let arguments = (ins DS_Tensor:$operand, StrArrayAttr:$axes, I64Attr:$split_dim,
                   I64Attr:$concat_dim);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_CompressedAllReduceOp : DS_CollectiveOp<"compressed_all_reduce"> {
  let summary = "the group's average by DeepSpeed's error-compensated 1-bit all-reduce";
  let description = [{
    DeepSpeed's `compressed_allreduce` (1-bit Adam's momentum exchange), on
    the operand flattened and zero-padded to the `N` elements of
    `worker_error`: each rank adds its worker error, sends the signs (one
    bit each, `>= 0` as +1) and one scale `|x| / sqrt(N)`, and keeps the new
    worker error `x - scale sign(x)`; rank j averages chunk j of every
    rank's scaled signs, adds its server error, and sends back that chunk's
    signs and scale the same way. The result is the operand's shape, each
    element a chunk's scale times its sign; the new errors are results.
    Per rank, about N / 8 bytes go out in an all-to-all and N / (8 n) in an
    all-gather (an f32 all-reduce moves about 4 N per direction).

    **Constraints:**
    - the module has a `ds.mesh`; `axes` are distinct axes of it.
    - f32 operands; the result has the operand's type.
    - `worker_error` is 1-D with `N >=` the operand's elements and `N` a
      multiple of 8 times the group size; `server_error` is 1-D of `N / n`.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$worker_error,
                   DS_FloatTensor:$server_error, StrArrayAttr:$axes);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$new_worker_error,
                      DS_FloatTensor:$new_server_error);
  let assemblyFormat = [{
    $operand `,` $worker_error `,` $server_error attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DS_SHARDING_TD
