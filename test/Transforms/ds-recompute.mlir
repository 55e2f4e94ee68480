// ds-recompute: the forward is cut at each layer's output (the numbered
// module of the node names); each layer is copied in front of its first
// backward reader, through an optimization_barrier on its checkpoint, and
// the backward reads the copy. The head (after the last checkpoint) is not
// recomputed.
// RUN: ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=layers" | FileCheck %s
// RUN: ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=layers checkpoints=1" | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=layers cpu=1" | FileCheck %s --check-prefix=CPU
// RUN: ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=budget budget=100000" | FileCheck %s --check-prefix=ROOMY
// RUN: not ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=budget budget=100" 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: not ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute="policy=often" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not ds-opt %s --ds-recompute="policy=layers" 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: ds-opt %s --ds-build-train-step="loss=mse" --ds-recompute | FileCheck %s --check-prefix=OFF
// RUN: sed -e '1i module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {' -e '$a }' %s | ds-opt --ds-build-train-step="loss=mse" --ds-recompute="policy=layers partition=1" | FileCheck %s --check-prefix=PART

// CHECK: module attributes {{{.*}}ds.recompute = {checkpoint_bytes = 256 : i64, checkpoints = 2 : i64, {{.*}}policy = "layers", {{.*}}recomputed_ops = 4 : i64, recomputed_segments = 2 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32> {ds.name = "x"}
// CHECK: %[[W0:.+]] = ml_program.global_load @"param:w0"
// CHECK: %[[W1:.+]] = ml_program.global_load @"param:w1"
// CHECK: %[[H1:.+]] = ds.add %[[X]], %{{.+}}
// CHECK: ds.reduce_mean {{.*}}ds.loss
// Layer 1 first (the backward runs the layers in reverse), from its checkpoint.
// CHECK: %[[B1:.+]] = ds.optimization_barrier %[[H1]]
// CHECK: %[[T1:.+]] = ds.matmul %[[B1]], %[[W1]] {ds.recompute = 2 : i64}
// CHECK: %[[A1:.+]] = ds.tanh %[[T1]] {ds.recompute = 2 : i64}
// CHECK: ds.mul %[[A1]], %[[A1]]
// Layer 0 from the step's input.
// CHECK: %[[B0:.+]] = ds.optimization_barrier %[[X]]
// CHECK: %[[T0:.+]] = ds.matmul %[[B0]], %[[W0]] {ds.recompute = 1 : i64}
// CHECK: %[[A0:.+]] = ds.tanh %[[T0]] {ds.recompute = 1 : i64}
// CHECK: ds.mul %[[A0]], %[[A0]]
// CHECK: return

// One checkpoint (number_checkpoints 1): the last layer's output; both
// layers are one segment, recomputed from the input.
// ONE: checkpoints = 1 : i64
// ONE: ds.reduce_mean {{.*}}ds.loss
// ONE: ds.optimization_barrier %arg0
// ONE: ds.matmul {{.*}}{ds.recompute = 1 : i64}
// ONE: ds.tanh {{.*}}{ds.recompute = 1 : i64}
// ONE: ds.add {{.*}}{ds.recompute = 1 : i64}
// ONE: ds.matmul {{.*}}{ds.recompute = 1 : i64}
// ONE: ds.tanh {{.*}}{ds.recompute = 1 : i64}
// ONE-NOT: ds.recompute = 2

// cpu_checkpointing: layer 0's output goes to the host where it is made,
// and comes back for layer 1's recomputation and its backward.
// CPU: cpu_checkpointing = true
// CPU-LABEL: func.func @train_step
// CPU: %[[H1:.+]] = ds.add %arg0
// CPU-NEXT: %[[HOST:.+]] = ds.offload %[[H1]]
// CPU: ds.reduce_mean {{.*}}ds.loss
// CPU: %[[BACK:.+]] = ds.fetch %[[HOST]]
// CPU-NEXT: ds.matmul %[[BACK]], {{.*}}{ds.recompute = 2 : i64}
// CPU: ds.transpose %[[BACK]]

// partition_activations on a tensor-parallel module: layer 0's output is
// held split over tp (half its bytes) and made whole again in front of
// layer 1's recomputation.
// PART: checkpoint_bytes = 192 : i64, {{.*}}partitioned_checkpoints = 1 : i64, partitions = 2 : i64
// PART-LABEL: func.func @train_step
// PART: %[[H1:.+]] = ds.add %arg0
// PART-NEXT: %[[P:.+]] = ds.shard %[[H1]] {sharding = #ds.sharding<{{\[\[}}"tp"], []]>}
// PART: ds.reduce_mean {{.*}}ds.loss
// PART: %[[W:.+]] = ds.shard %[[P]] {sharding = #ds.sharding<{{\[\[}}], []]>}
// PART-NEXT: %[[B:.+]] = ds.optimization_barrier %[[W]]
// PART-NEXT: ds.matmul %[[B]], {{.*}}{ds.recompute = 2 : i64}

// A budget the unchanged step fits recomputes nothing.
// ROOMY: policy = "budget", {{.*}}recomputed_ops = 0 : i64, recomputed_segments = 0 : i64
// ROOMY-NOT: ds.optimization_barrier
// TIGHT: error: ds-recompute: an activation budget of 0.1 kB cannot be met: without recomputation the step's activations peak at about {{.*}} kB, and recomputing from every possible checkpoint still needs about {{.*}} kB (estimated before fusion)
// POLICY: error: ds-recompute: unknown policy 'often' (none, layers, sqrt or budget)
// NOSTEP: error: ds-recompute needs a single-block @train_step (run ds-build-train-step first)
// Without a policy or a config asking for it, nothing changes.
// OFF-NOT: ds.recompute
// OFF-NOT: optimization_barrier
func.func @main(%x: tensor<4x8xf32> {ds.name = "x"}) -> (tensor<4x8xf32> {ds.name = "y"}) {
  %w0 = ds.parameter "w0" = dense<0.1> : tensor<8x8xf32> loc("initializer 'w0'")
  %w1 = ds.parameter "w1" = dense<0.2> : tensor<8x8xf32> loc("initializer 'w1'")
  %wh = ds.parameter "wh" = dense<0.3> : tensor<8x8xf32> loc("initializer 'wh'")
  %t0 = ds.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("node '/layers.0/fc/MatMul' (MatMul, domain , opset 17)")
  %a0 = ds.tanh %t0 : tensor<4x8xf32> loc("node '/layers.0/act/Tanh' (Tanh, domain , opset 17)")
  %h1 = ds.add %x, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("node '/layers.0/Add' (Add, domain , opset 17)")
  %t1 = ds.matmul %h1, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("node '/layers.1/fc/MatMul' (MatMul, domain , opset 17)")
  %a1 = ds.tanh %t1 : tensor<4x8xf32> loc("node '/layers.1/act/Tanh' (Tanh, domain , opset 17)")
  %h2 = ds.add %h1, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("node '/layers.1/Add' (Add, domain , opset 17)")
  %y = ds.matmul %h2, %wh : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("node '/head/MatMul' (MatMul, domain , opset 17)")
  return %y : tensor<4x8xf32>
}
