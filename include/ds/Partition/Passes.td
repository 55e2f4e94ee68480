//===- Passes.td - partitioning passes ---------------------*- tablegen -*-===//
//
// From one global program to the per-rank one: decide shardings
// (ds-tensor-parallel, and later ZeRO), propagate them through the graph,
// turn producer/consumer disagreements into collectives, then rewrite types
// to each rank's slice.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PARTITION_PASSES_TD
#define DS_PARTITION_PASSES_TD

include "mlir/Pass/PassBase.td"

def TensorParallelPass : Pass<"ds-tensor-parallel", "ModuleOp"> {
  let summary = "splits transformer blocks and MLP stacks Megatron-style over the `tp` mesh axis";
  let description = [{
    Finds pairs of weight matmuls (a matmul whose right operand is a
    `ds.parameter`) connected by ops that can run on slices: the first
    (QKV projections, the first MLP layer) becomes column-parallel, the
    second (attention output, second MLP layer) row-parallel, so each block
    needs one all_reduce (after the row-parallel matmul) and attention heads
    are split across ranks. A fused QKV weight whose output is split into
    equal parts (as GPT-2 and torch.nn.MultiheadAttention export it) is
    first split into one weight per part, so each rank's heads stay whole;
    so is the packed form (reshape to [B, T, 3, H, D], transpose, gather part
    i) timm and ViT export.

    The pass only adds the module's `ds.mesh` (a `tp` axis of `size`) and a
    `ds.shard` constraint on each column-parallel weight; propagation and
    ds-insert-collectives derive the rest. A weight dimension or a head
    count that does not divide by `size` is an error naming the layer.

    ```mlir
    %h = ds.matmul %x, %w1 ...      // column-parallel: %w1 becomes ds.shard %w1 [[], ["tp"]]
    %a = ds.gelu %h ...
    %y = ds.matmul %a, %w2 ...      // row-parallel: partial sums, all_reduce follows
    ```
  }];
  let options = [
    Option<"size", "size", "int64_t", /*default=*/"2", "ranks on the tp axis">,
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"", "name of the mesh axis">,
    Option<"training", "training", "bool", /*default=*/"false",
           "also constrain the row-parallel weights and the parameters read between the "
           "pair (biases), so a training module's state is laid out split">
  ];
  let statistics = [
    Statistic<"numPairs", "num-pairs", "column/row-parallel matmul pairs">,
    Statistic<"numFusedSplit", "num-fused-split", "fused weights split into parts">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def PropagateShardingPass : Pass<"ds-propagate-sharding", "ModuleOp"> {
  let summary = "gives every value a sharding, from the constraints and each op's rule";
  let description = [{
    Walks each function in order and applies the sharding rule of every op
    (include/ds/Partition/Sharding.h) to the shardings its operands have,
    recording the result's in `ds.sharding` (`ds.shardings` for several
    results). Elementwise ops, transposes and reshapes carry splits along
    (a reshape that merges a split dimension with an unsplit one records an
    `outer` factor); a matmul whose contraction dimension is split on both
    sides gives an unreduced partial sum; ops without a rule compute on
    replicated values. Nothing is moved yet: that is ds-insert-collectives.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def InsertCollectivesPass : Pass<"ds-insert-collectives", "ModuleOp"> {
  let summary = "turns sharding disagreements into collectives";
  let description = [{
    For every op, compares the sharding each operand has with the one the
    op's rule needs and inserts what moves it there: `all_reduce` for a
    partial sum needed whole (`reduce_scatter` when it is needed split on
    the same axes), `all_gather` to undo a split, `shard_slice` to split a
    replicated value (no communication; a sliced parameter becomes per-rank
    weights in the plan). `ds.shard` constraints are replaced by the same
    conversion. Function results are made replicated.

    ```mlir
    %p = ds.matmul %h, %w2s {ds.sharding = #ds.sharding<[[], []], partial = ["tp"]>}
    %y = ds.add %p, %b
    ```
    becomes
    ```mlir
    %p = ds.matmul %h, %w2s {ds.sharding = #ds.sharding<[[], []], partial = ["tp"]>}
    %r = ds.all_reduce %p {axes = ["tp"]}
    %y = ds.add %r, %b
    ```
  }];
  let statistics = [
    Statistic<"numCollectives", "num-collectives", "collectives inserted (all_reduce, all_gather, reduce_scatter)">,
    Statistic<"numSlices", "num-slices", "shard_slice ops inserted">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def GlobalToLocalPass : Pass<"ds-global-to-local", "ModuleOp"> {
  let summary = "rewrites every type to one rank's slice (SPMD form)";
  let description = [{
    Each value's type becomes its sharding's per-rank shape (split
    dimensions divided by their axes' sizes) and each function gets
    `ds.spmd`, after which a collective's shapes show what it moves (an
    all_gather's result is its operand times the group). Every rank runs the
    same program; only parameters sliced by `shard_slice` differ, and the
    plan stores each rank's slice as that rank's weights. A split that does
    not divide is an error naming the op.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DataParallelPass : Pass<"ds-data-parallel", "ModuleOp"> {
  let summary = "data parallelism (ZeRO stage 0) of a training module over the `dp` mesh axis";
  let description = [{
    Each rank runs `@train_step` on its own micro-batches (ds-run feeds rank
    r its slice of every global batch) and accumulates its gradients; at the
    gradient accumulation boundary `@optimizer_step` all-reduces each
    gradient and divides by the rank count, so every rank clips and updates
    with the gradient of the global batch's mean loss and all ranks keep
    identical parameters and optimizer state (DeepSpeed's stage 0). The
    loss `@train_step` returns is averaged the same way, so the logged loss
    is the mean over the global batch whatever the rank count.

    ZeRO stages 1 and 2 partition the optimizer: each parameter is
    flattened and zero-padded to a multiple of the rank count, and rank r
    owns block r. Stage 1 keeps whole gradient accumulators and
    reduce-scatters them at the boundary; stage 2 reduce-scatters each
    micro-step's gradient into a sharded accumulator (`grad:` globals hold
    one block). Either way the optimizer moments (`adam_m:`, `adam_v:`,
    `momentum:`) hold one block per rank, the clipping norm is an all_reduce
    of the blocks' squared sums, each rank updates its block of every
    parameter, and an all_gather rebuilds the parameters: 2 Psi of traffic
    per step, like stage 0's all_reduce. Stage 3 also stores every trained
    parameter as one block per rank (its whole initial value kept in
    `ds.full_value` for the plan) and all-gathers it right before each use
    outside the optimizer step: once in the forward and again in the
    backward, each gathered copy living only until that use (3 Psi of
    traffic per step); the optimizer updates the block in place. Parameters
    smaller than `stage3_param_persistence_threshold` elements stay whole
    on every rank and are updated as at stage 2. The
    functions become `ds.spmd`.

    ```mlir
    %g = ml_program.global_load @"grad:fc1.weight" : tensor<8x16xf32>
    ```
    becomes
    ```mlir
    %g = ml_program.global_load @"grad:fc1.weight" : tensor<8x16xf32>
    %s = ds.all_reduce %g {axes = ["dp"]} : tensor<8x16xf32>
    %a = ds.mul %s, %inv_ranks : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    ```
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"stage", "stage", "int64_t", /*default=*/"-1",
           "ZeRO stage: 0 (replicated), 1 (optimizer state sharded), 2 (and gradients), "
           "3 (and parameters); "
           "-1: the config's (ds.training's zero_stage)">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t", /*default=*/"-1",
           "ZeRO-3: parameters with fewer elements stay whole on every rank; -1: the config's "
           "stage3_param_persistence_threshold (DeepSpeed's default 1e5)">,
    Option<"axis", "axis", "std::string", /*default=*/"\"dp\"", "name of the mesh axis">
  ];
  let statistics = [
    Statistic<"numReduced", "num-reduced", "gradients all-reduced">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def ZeroSchedulePass : Pass<"ds-schedule-zero", "ModuleOp"> {
  let summary = "buckets and schedules the ZeRO collectives of a data-parallel training module";
  let description = [{
    Runs after `ds-data-parallel` and decides, from DeepSpeed's
    `zero_optimization` knobs (kept in the module's `ds.training`), when and
    in what groups the collectives run. The runtime issues collectives on
    the communication stream in program order and a kernel waits only for
    collectives whose bytes it reads, so moving a collective earlier in the
    program is what overlaps it with compute.

    - `reduce_bucket_size` (elements): gradient reduce-scatters (stages 1-3)
      and gradient all-reduces (stage 0) that follow one another are merged
      into buckets of at most this many elements: one collective per bucket
      over the members laid side by side ([ranks, block] pieces joined on
      the block dimension, so each rank still receives its block of every
      member).
    - `overlap_comm`: a bucket is issued as soon as its last gradient is
      produced (overlapping the rest of the backward); without it, right
      before the first use of its result. DeepSpeed's default: on at stage
      3, off otherwise.
    - `allgather_bucket_size` (elements): the optimizer step's parameter
      all-gathers (stages 1-2) are bucketed the same way.
    - `stage3_max_reuse_distance` (elements): a stage-3 parameter gathered
      for one use is kept for its next use when fewer elements of other
      parameters are gathered in between (its forward copy serves the
      backward), instead of being released and gathered again.
    - `stage3_prefetch_bucket_size` (elements): each stage-3 gather is
      hoisted so that, while one parameter is in use, the gathers of the
      next ones are in flight, up to this many elements ahead.
    - `stage3_max_live_parameters` (elements): hoisting and reuse never make
      more gathered parameter elements live at once than this.
    - `contiguous_gradients` is accepted: ds's statically planned arena
      never fragments, and bucket members are copied into one contiguous
      buffer anyway.

    ```mlir
    %a = ds.reduce_scatter %g1 {axes = ["dp"], dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    %b = ds.reduce_scatter %g2 {axes = ["dp"], dim = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    ```
    becomes, with both in one bucket,
    ```mlir
    %1 = ds.reshape %g1 : (tensor<8xf32>) -> tensor<2x4xf32>
    %2 = ds.reshape %g2 : (tensor<4xf32>) -> tensor<2x2xf32>
    %3 = ds.concat %1, %2 {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
    %4 = ds.reshape %3 : (tensor<2x6xf32>) -> tensor<12xf32>
    %5 = ds.reduce_scatter %4 {axes = ["dp"], dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
    %a = ds.slice %5 {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<4xf32>
    %b = ds.slice %5 {starts = array<i64: 4>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<2xf32>
    ```
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"-1", "ZeRO stage; -1: ds.training's">,
    Option<"reduceBucketSize", "reduce-bucket-size", "int64_t", /*default=*/"-1",
           "elements per gradient reduction bucket; -1: ds.training's (DeepSpeed's 5e8)">,
    Option<"allgatherBucketSize", "allgather-bucket-size", "int64_t", /*default=*/"-1",
           "elements per parameter all-gather bucket; -1: ds.training's (5e8)">,
    Option<"overlapComm", "overlap-comm", "int64_t", /*default=*/"-1",
           "1: issue reductions as gradients are produced, 0: before their first use; "
           "-1: ds.training's (DeepSpeed: on at stage 3)">,
    Option<"prefetchBucketSize", "prefetch-bucket-size", "int64_t", /*default=*/"-1",
           "stage 3: elements gathered ahead of use; -1: ds.training's (5e7)">,
    Option<"maxLiveParameters", "max-live-parameters", "int64_t", /*default=*/"-1",
           "stage 3: bound on gathered elements live at once; -1: ds.training's (1e9)">,
    Option<"maxReuseDistance", "max-reuse-distance", "int64_t", /*default=*/"-1",
           "stage 3: keep a gathered parameter for a next use this close (elements); "
           "-1: ds.training's (1e9)">,
    Option<"zeroQuantizedWeights", "quantized-weights", "int64_t", /*default=*/"-1",
           "stage 3: 1 gathers parameters as int8 blocks of 256 with a scale each "
           "(ZeRO++'s qwZ); -1: ds.training's zero_quantized_weights (0)">,
    Option<"zeroQuantizedGradients", "quantized-gradients", "int64_t", /*default=*/"-1",
           "stage 3: 1 reduces gradients as int8 blocks of 256 with a scale each in one "
           "all-to-all (ZeRO++'s qgZ); -1: ds.training's zero_quantized_gradients (0)">,
    Option<"axis", "axis", "std::string", /*default=*/"\"dp\"", "name of the mesh axis">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "collectives that merge several">,
    Statistic<"numReused", "num-reused", "stage-3 gathers replaced by an earlier one">,
    Statistic<"numPrefetched", "num-prefetched", "stage-3 gathers hoisted ahead of their use">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}


def OffloadPass : Pass<"ds-offload", "ModuleOp"> {
  let summary = "ZeRO-Offload: optimizer state in host memory, its update run on the host";
  let description = [{
    DeepSpeed's `zero_optimization.offload_optimizer` (`"device": "cpu"`),
    decided at compile time. The optimizer state of each offloaded
    parameter (Adam's moments, SGD's momentum, the fp32 master of a 16-bit
    parameter) and its gradient accumulator move to host memory
    (`ds.memory_space = #ds<memory_space host>` on the globals). Every op
    that updates them then runs on the host: the optimizer update, the
    gradient accumulation, the gradient-norm partial sums and the zeroing.
    Values crossing between the spaces get a transfer: `ds.offload` (device
    to host) right after a device value is produced (the reduced gradient
    partition, as soon as its reduce-scatter completes), `ds.fetch` (host to
    device) before a device op reads a host value (the updated parameter
    partition before its all-gather, a norm before its all-reduce).
    Constants a host op reads are cloned onto the host.

    Device memory then holds the parameters, the activations and the
    transfer staging only; `ds-opt --report` shows bytes per memory space
    and transfer bytes per step. Results are bitwise those of the
    non-offloaded plan: the same kernels run on the same values, only in
    another pool.

    With `"device": "nvme"` the optimizer state (and 16-bit masters) goes
    one level farther, to NVMe (`#ds<memory_space nvme>`; the spaces are a
    hierarchy device < host < nvme and each transfer moves one level), the
    gradient accumulators stay in host memory. Updates are grouped into
    sub-groups of `sub_group_size` elements (consecutive parameters, never
    split, as DeepSpeed groups them): a sub-group's swap-ins (`ds.fetch` of
    an NVMe global's load) move together before the previous sub-group's
    first update, so the runtime's I/O thread reads group k+1 while group k
    updates, and its swap-outs follow its last update together; the runtime
    runs each such run of swaps as one stream of I/O.

    With `offload_param` (`param-device`; ZeRO-3, ZeRO-Infinity) the
    partitioned parameters (those ZeRO-3 does not keep whole under
    `stage3_param_persistence_threshold`) live in host memory or on NVMe:
    each use (its all-gather) gets its own fetch right before it, so the
    device holds a partition only until its gather; the optimizer update
    writes the offloaded parameter where it lives. With NVMe, partitions
    stay in host memory until `max_in_cpu` elements are there; the rest are
    swapped in up to `buffer_count` - 1 uses ahead (at most `buffer_count`
    in host memory at once), each at most `buffer_size` elements (a larger
    one is an error naming it).

    With `weights=cpu` (ZeRO-Inference: an inference or generation plan's
    `offload_param`) every weight of at least `weights-threshold` elements
    that the device reads (parameters, constants such as quantized weights)
    lives in host memory. Each reader gets its own `ds.fetch` of it, and the
    fetches move one layer ahead (the number of weight readers per
    attention): the device holds the weights of the layer it computes and
    of the next, which the copy brings in meanwhile. With `weights=nvme`
    each such weight becomes an immutable global on NVMe (`weight:NAME`,
    one per weight, shared by a generation plan's programs); a reader's
    swap-in (`ds.fetch` of its load, NVMe to host) moves two layers ahead,
    its fetch to the device one layer ahead, so the drive, the copy and
    the compute each work on their own layer.

    `ratio` < 1 offloads the parameters (in program order) whose elements
    make up that fraction of the total, the rest update on the device
    (DeepSpeed's partial offload). Runs last before ds-plan-memory, so fused
    ops are placed whole; it ends by checking the placement rules
    (MemorySpaces::verify). Without offload in the module's `ds.training`
    it does nothing.

    ```mlir
    %g = ds.reduce_scatter %d ...
    %acc = ds.fused_elementwise %g, %scale, %grad ...   // %grad: host global
    ```
    becomes
    ```mlir
    %g = ds.reduce_scatter %d ...
    %h = ds.offload %g : tensor<8xf32>
    %acc = ds.fused_elementwise %h, %scale_h, %grad {ds.memory_space = #ds<memory_space host>} ...
    ```
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"\"",
           "cpu or none; empty: ds.training's offload_optimizer">,
    Option<"paramDevice", "param-device", "std::string", /*default=*/"\"\"",
           "cpu, nvme or none: where ZeRO-3's partitioned parameters live; empty: "
           "ds.training's offload_param">,
    Option<"ratio", "ratio", "double", /*default=*/"-1.0",
           "fraction of the parameters (by elements) updated on the host; -1: ds.training's "
           "offload_ratio (1)">,
    Option<"subGroupSize", "sub-group-size", "int64_t", /*default=*/"0",
           "elements of optimizer state swapped and updated as one NVMe sub-group; 0: "
           "ds.training's sub_group_size (1e9)">,
    Option<"weights", "weights", "std::string", /*default=*/"\"none\"",
           "cpu, nvme or none: where an inference plan's weights live (ZeRO-Inference)">,
    Option<"weightsThreshold", "weights-threshold", "int64_t", /*default=*/"100000",
           "weights with fewer elements stay on the device (stage3_param_persistence_threshold)">
  ];
  let statistics = [
    Statistic<"numOffloaded", "num-offloaded", "parameters whose update runs on the host">,
    Statistic<"numTransfers", "num-transfers", "ds.offload and ds.fetch ops inserted">,
    Statistic<"numPrefetched", "num-prefetched", "NVMe swap-ins moved ahead of an earlier update or use">,
    Statistic<"numSubGroups", "num-sub-groups", "NVMe optimizer sub-groups, each swapped as one batch">,
    Statistic<"numParamsOffloaded", "num-params-offloaded", "parameters kept off the device">,
    Statistic<"numWeightsOffloaded", "num-weights-offloaded", "inference weights kept in host memory">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::ml_program::MLProgramDialect"];
}

#endif // DS_PARTITION_PASSES_TD
