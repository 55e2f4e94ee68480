// ds-fuse-optimizer: the squared gradient norm as one ds.sum_squares, and
// one zero fill per gradient accumulator (written in place by the plan).
// RUN: ds-opt %s --ds-fuse-optimizer -split-input-file | FileCheck %s

// The norm of clip_grad_norm_ as ds-build-train-step builds it: a square, a
// reduction over every axis and an add per gradient (a scalar one too);
// one shared zero fill stored to both accumulators.
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[G0:.+]] = ml_program.global_load @g0
// CHECK: %[[G1:.+]] = ml_program.global_load @g1
// CHECK: %[[G2:.+]] = ml_program.global_load @g2
// CHECK: %[[S:.+]] = ds.sum_squares %[[G0]], %[[G1]], %[[G2]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[N:.+]] = ds.sqrt %[[S]]
// CHECK-NOT: ds.mul
// CHECK-NOT: ds.reduce_sum
// CHECK: %[[Z0:.+]] = ds.fill 0.000000e+00 : tensor<8xf32>
// CHECK-NEXT: ml_program.global_store @g1 = %[[Z0]]
// CHECK-NEXT: %[[Z1:.+]] = ds.fill 0.000000e+00 : tensor<8xf32>
// CHECK-NEXT: ml_program.global_store @m = %[[Z1]]
// CHECK-NEXT: return %[[N]]
ml_program.global private mutable @g0(dense<0.0> : tensor<4x8xf32>) : tensor<4x8xf32>
ml_program.global private mutable @g1(dense<0.0> : tensor<8xf32>) : tensor<8xf32>
ml_program.global private mutable @g2(dense<0.0> : tensor<f32>) : tensor<f32>
ml_program.global private mutable @m(dense<0.0> : tensor<8xf32>) : tensor<8xf32>
func.func @optimizer() -> tensor<f32> {
  %g0 = ml_program.global_load @g0 : tensor<4x8xf32>
  %g1 = ml_program.global_load @g1 : tensor<8xf32>
  %g2 = ml_program.global_load @g2 : tensor<f32>
  %q0 = ds.mul %g0, %g0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s0 = ds.reduce_sum %q0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %q1 = ds.mul %g1, %g1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %s1 = ds.reduce_sum %q1 {axes = array<i64: 0>, keepdims = false} : (tensor<8xf32>) -> tensor<f32>
  %a = ds.add %s0, %s1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %q2 = ds.mul %g2, %g2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %t = ds.add %a, %q2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %n = ds.sqrt %t : tensor<f32>
  %z = ds.fill 0.0 : tensor<8xf32>
  ml_program.global_store @g1 = %z : tensor<8xf32>
  ml_program.global_store @m = %z : tensor<8xf32>
  return %n : tensor<f32>
}

// -----

// Kept: a partial reduction, a square read elsewhere, a product of two
// different tensors.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: ds.sum_squares
func.func @kept(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<f32>, tensor<4x8xf32>, tensor<f32>) {
  %q = ds.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = ds.reduce_sum %q {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %q2 = ds.mul %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s2 = ds.reduce_sum %q2 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %p = ds.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s3 = ds.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %r, %s2, %q2, %s3 : tensor<4xf32>, tensor<f32>, tensor<4x8xf32>, tensor<f32>
}
