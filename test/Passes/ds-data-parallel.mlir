// ds-data-parallel: the module gets a dp mesh axis; @optimizer_step
// averages every gradient over it before use (all_reduce, then 1/ranks) and
// @train_step returns the loss averaged the same way.
// RUN: ds-opt %s --ds-data-parallel=world-size=4 | FileCheck %s
// RUN: not ds-opt %s --ds-data-parallel=world-size=0 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: module attributes {ds.mesh = #ds.mesh<[<"dp" = 4>]>}
module {
  ml_program.global private mutable @"param:w"(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private mutable @"grad:w"(dense<0.0> : tensor<4xf32>) : tensor<4xf32>
  // CHECK-LABEL: func.func @train_step
  func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32> {ds.name = "loss"}) {
    %w = ml_program.global_load @"param:w" : tensor<4xf32>
    %p = ds.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = ds.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    ml_program.global_store @"grad:w" = %x : tensor<4xf32>
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
    %g = ml_program.global_load @"grad:w" : tensor<4xf32>
    %sq = ds.mul %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    return %n : tensor<f32>
  }
}
// BAD: ds-data-parallel: world-size must be >= 1
