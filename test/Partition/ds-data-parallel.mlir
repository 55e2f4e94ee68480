// ds-data-parallel: the module gets a dp mesh axis; @optimizer_step
// averages every gradient over it before use (all_reduce, then 1/ranks) and
// @train_step returns the loss averaged the same way.
// RUN: ds-opt %s --ds-data-parallel=world-size=4 | FileCheck %s
// RUN: not ds-opt %s --ds-data-parallel=world-size=0 2>&1 | FileCheck %s --check-prefix=BAD
// ZeRO finds the gradient norm by its ds.grad_norm marker, not by position.
// RUN: sed 's/ {ds.grad_norm}//' %s | not ds-opt --ds-data-parallel="world-size=2 stage=1" 2>&1 | FileCheck %s --check-prefix=NONORM
// NONORM: ZeRO expects the optimizer step ds-build-train-step builds
// ZeRO-2 (--ds-data-parallel="world-size=4 stage=2"): the gradient
// accumulator and the optimizer moments hold one block of the flattened,
// padded parameter per rank; each micro-step reduce-scatters its gradient,
// the optimizer updates the rank's block and all-gathers the parameter.
// RUN: ds-opt %s --ds-data-parallel="world-size=4 stage=2" | FileCheck %s --check-prefix=Z2
// ZeRO-3 also stores the parameter as one block per rank (its whole initial
// value kept for the plan) and all-gathers it right before each use.
// RUN: ds-opt %s --ds-data-parallel="world-size=4 stage=3 persistence-threshold=0" | FileCheck %s --check-prefix=Z3
// Parameters below stage3_param_persistence_threshold stay whole (as at stage 2).
// RUN: ds-opt %s --ds-data-parallel="world-size=4 stage=3" | FileCheck %s --check-prefix=PERSIST

// CHECK: module attributes {ds.mesh = #ds.mesh<[<"dp" = 4>]>}
module {
  ml_program.global private mutable @"param:w"(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
  // Z3: ml_program.global private mutable @"param:w" : tensor<1xf32> {ds.full_value = dense<1.000000e+00> : tensor<4xf32>, ds.partition_axis = "dp", ds.partition_numel = 4 : i64, ds.partition_shape = array<i64: 4>}
  // PERSIST: ml_program.global private mutable @"param:w"(dense<1.000000e+00> : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private mutable @"grad:w" : tensor<4xf32>
  ml_program.global private mutable @"momentum:w" : tensor<4xf32>
  // Z2: ml_program.global private mutable @"momentum:w" : tensor<1xf32> {ds.partition_axis = "dp", ds.partition_numel = 4 : i64, ds.partition_shape = array<i64: 4>}
  // CHECK-LABEL: func.func @train_step
  func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32> {ds.name = "loss"}) {
    // Z3-LABEL: func.func @train_step
    // Z3: %[[B:.+]] = ml_program.global_load @"param:w" : tensor<1xf32>
    // Z3: %[[W:.+]] = ds.all_gather %[[B]] {axes = ["dp"], dim = 0 : i64} : (tensor<1xf32>) -> tensor<4xf32>
    // Z3: ds.mul %[[W]], %arg0
    %w = ml_program.global_load @"param:w" : tensor<4xf32>
    %p = ds.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = ds.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %acc = ml_program.global_load @"grad:w" : tensor<4xf32>
    %sum = ds.add %acc, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ml_program.global_store @"grad:w" = %sum : tensor<4xf32>
    // Z2: %[[RS:.+]] = ds.reduce_scatter %{{.+}} {axes = ["dp"], dim = 0 : i64} : (tensor<4xf32>) -> tensor<1xf32>
    // Z2: ml_program.global_store @"grad:w" = %{{.+}} : tensor<1xf32>
    // CHECK: %[[S:.+]] = ds.all_reduce %{{.+}} {axes = ["dp"]} : tensor<f32>
    // CHECK: %[[Q:.+]] = ds.constant dense<2.500000e-01> : tensor<f32>
    // CHECK: %[[L:.+]] = ds.mul %[[S]], %[[Q]]
    // CHECK: return %[[L]]
    return %l : tensor<f32>
  }
  // CHECK-LABEL: func.func @optimizer_step
  func.func @optimizer_step(%lr: tensor<f32>) -> (tensor<f32> {ds.name = "grad_norm"}) {
    // CHECK: %[[G:.+]] = ml_program.global_load @"grad:w"
    // CHECK: %[[R:.+]] = ds.all_reduce %[[G]] {axes = ["dp"]} : tensor<4xf32>
    // CHECK: %[[A:.+]] = ds.mul %[[R]], %{{.+}}
    // CHECK: ds.mul %[[A]], %[[A]]
    // Z3-LABEL: func.func @optimizer_step
    // Z3: %[[PB:.+]] = ml_program.global_load @"param:w" : tensor<1xf32>
    // Z3: %[[NP3:.+]], %{{.+}} = ds.sgd_update %[[PB]]
    // Z3: ml_program.global_store @"param:w" = %[[NP3]] : tensor<1xf32>
    // Z2-LABEL: func.func @optimizer_step
    // Z2: %[[G:.+]] = ml_program.global_load @"grad:w" : tensor<1xf32>
    // Z2: ds.all_reduce %{{.+}} {axes = ["dp"]} : tensor<f32>
    // Z2: %[[P:.+]] = ds.shard_slice %{{.+}} {axes = ["dp"], dim = 0 : i64} : (tensor<4xf32>) -> tensor<1xf32>
    // Z2: %[[NP:.+]], %[[NM:.+]] = ds.sgd_update %[[P]], %[[G]]
    // Z2: ds.all_gather %[[NP]] {axes = ["dp"], dim = 0 : i64} : (tensor<1xf32>) -> tensor<4xf32>
    %g = ml_program.global_load @"grad:w" : tensor<4xf32>
    %sq = ds.mul %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %norm = ds.sqrt %n {ds.grad_norm} : tensor<f32>
    %w = ml_program.global_load @"param:w" : tensor<4xf32>
    %m = ml_program.global_load @"momentum:w" : tensor<4xf32>
    %first = ds.constant dense<1.0> : tensor<f32>
    %np, %nm = ds.sgd_update %w, %g, %m, %lr, %first, %first {dampening = 0.0 : f64, momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
    ml_program.global_store @"param:w" = %np : tensor<4xf32>
    ml_program.global_store @"momentum:w" = %nm : tensor<4xf32>
    %z = ds.fill 0.0 : tensor<4xf32>
    ml_program.global_store @"grad:w" = %z : tensor<4xf32>
    return %norm : tensor<f32>
  }
}
// BAD: ds-data-parallel: world-size must be >= 1
