// ds-fuse-norms: RMSNorm written as a square, a mean over the last axis,
// epsilon, square root, reciprocal or division and a scale becomes one
// ds.rms_norm.
// RUN: ds-opt %s --ds-fuse-norms -split-input-file | FileCheck %s

// Llama's norm as PyTorch 2 exports it (reciprocal, scale on the left).
// CHECK-LABEL: func.func @llama
// CHECK-NOT: ds.reduce_mean
// CHECK: %[[Y:.+]] = ds.rms_norm %arg0, %arg1 {epsilon = 9.99999997E-7 : f32} : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @llama(%x: tensor<1x4x8xf32>, %w: tensor<8xf32>) -> tensor<1x4x8xf32> {
  %eps = ds.constant dense<1.0e-6> : tensor<f32>
  %q = ds.mul %x, %x : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %m = ds.reduce_mean %q {axes = array<i64: 2>} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %e = ds.add %m, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = ds.sqrt %e : tensor<1x4x1xf32>
  %r = ds.reciprocal %s : tensor<1x4x1xf32>
  %n = ds.mul %x, %r : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %y = ds.mul %w, %n : (tensor<8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// A division and no scale.
// CHECK-LABEL: func.func @divided
// CHECK: %[[Y:.+]] = ds.rms_norm %arg0 {epsilon = 9.99999974E-6 : f32} : (tensor<3x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @divided(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %eps = ds.constant dense<1.0e-5> : tensor<1xf32>
  %q = ds.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m = ds.reduce_mean %q {axes = array<i64: 1>} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e = ds.add %eps, %m : (tensor<1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %s = ds.sqrt %e : tensor<3x1xf32>
  %y = ds.div %x, %s : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// Kept: a mean over another axis, a statistic read elsewhere, and an
// epsilon that is not a known constant.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: ds.rms_norm
func.func @kept(%x: tensor<3x8xf32>, %t: tensor<f32>) -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x1xf32>, tensor<3x8xf32>) {
  %eps = ds.constant dense<1.0e-5> : tensor<f32>
  %q = ds.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m = ds.reduce_mean %q {axes = array<i64: 0>} : (tensor<3x8xf32>) -> tensor<1x8xf32>
  %e = ds.add %m, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = ds.sqrt %e : tensor<1x8xf32>
  %y = ds.div %x, %s : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  %q2 = ds.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m2 = ds.reduce_mean %q2 {axes = array<i64: 1>} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e2 = ds.add %m2, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s2 = ds.sqrt %e2 : tensor<3x1xf32>
  %y2 = ds.div %x, %s2 : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %q3 = ds.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m3 = ds.reduce_mean %q3 {axes = array<i64: 1>} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e3 = ds.add %m3, %t : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s3 = ds.sqrt %e3 : tensor<3x1xf32>
  %y3 = ds.div %x, %s3 : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  return %y, %y2, %m2, %y3 : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x1xf32>, tensor<3x8xf32>
}
