// ds-fold-batch-norm: per-channel affine ops after a convolution with a
// constant weight fold into its weight and bias.
// RUN: ds-opt %s --ds-fold-batch-norm -split-input-file | FileCheck %s

// BatchNormalization as the importer writes it: (x - mean) / sqrt(var +
// eps) * gamma + beta with [C, 1, 1] statistics (parameters). Two output
// channels: a = gamma / sqrt(var + eps) = (2, 0.5), d = beta - a * mean.
// W' = a W, b' = a b + d = (2 * 1 + 1 - 2 * 1, 0.5 * 2 + 0 - 0.5 * 4) = (1, -1).
// CHECK-LABEL: func.func @bn
// CHECK-DAG: %[[W:.+]] = ds.parameter "w" = dense<{{\[}}[{{\[}}[2.000000e+00]]], {{\[}}[{{\[}}5.000000e-01]]]]> : tensor<2x1x1x1xf32>
// CHECK-DAG: %[[B:.+]] = ds.constant dense<[1.000000e+00, -1.000000e+00]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ds.conv %arg0, %[[W]], %[[B]]
// CHECK-NOT: ds.sqrt
// CHECK: return %[[Y]]
func.func @bn(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w = ds.parameter "w" = dense<1.0> : tensor<2x1x1x1xf32>
  %b = ds.parameter "b" = dense<[1.0, 2.0]> : tensor<2xf32>
  %mean = ds.parameter "mean" = dense<[1.0, 4.0]> : tensor<2xf32>
  %var = ds.parameter "var" = dense<[0.0, 15.0]> : tensor<2xf32>
  %gamma = ds.parameter "gamma" = dense<[2.0, 2.0]> : tensor<2xf32>
  %beta = ds.parameter "beta" = dense<[1.0, 0.0]> : tensor<2xf32>
  %eps = ds.constant dense<1.0> : tensor<f32>
  %m = ds.reshape %mean : (tensor<2xf32>) -> tensor<2x1x1xf32>
  %v = ds.reshape %var : (tensor<2xf32>) -> tensor<2x1x1xf32>
  %g = ds.reshape %gamma : (tensor<2xf32>) -> tensor<2x1x1xf32>
  %be = ds.reshape %beta : (tensor<2xf32>) -> tensor<2x1x1xf32>
  %ve = ds.add %v, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %sd = ds.sqrt %ve : tensor<2x1x1xf32>
  %c = ds.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  %d = ds.sub %c, %m : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %n = ds.div %d, %sd : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %s = ds.mul %n, %g : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y = ds.add %s, %be : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  return %y : tensor<1x2x3x3xf32>
}

// -----

// Kept: an operand varying along another dimension, a weight that is not
// constant (training reads it from a global), a divisor on the left.
// CHECK-LABEL: func.func @kept
// CHECK: ds.add
// CHECK: ds.mul
// CHECK: ds.div
func.func @kept(%x: tensor<1x1x3x3xf32>, %wt: tensor<2x1x1x1xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) {
  %w = ds.parameter "w" = dense<1.0> : tensor<2x1x1x1xf32>
  %row = ds.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %two = ds.constant dense<2.0> : tensor<f32>
  %c1 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y1 = ds.add %c1, %row : (tensor<1x2x3x3xf32>, tensor<3xf32>) -> tensor<1x2x3x3xf32>
  %c2 = ds.conv %x, %wt {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y2 = ds.mul %c2, %two : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %c3 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y3 = ds.div %two, %c3 : (tensor<f32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %y1, %y2, %y3 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
}

// -----

// A normalization before a convolution (DenseNet's pre-activation, its input
// also read by a concatenation): the four ops and the statistics'
// arithmetic become one multiply and one add by [1, C, 1, 1] constants,
// a_c = g_c / sqrt(v_c + eps) = [0.5, 1] and d_c = b_c - m_c a_c = [0, -2].
// CHECK-LABEL: func.func @pre_activation
// CHECK-DAG: %[[A:.+]] = ds.constant dense<{{\[\[\[\[}}5.000000e-01]], {{\[\[}}1.000000e+00]]]]> : tensor<1x2x1x1xf32>
// CHECK-DAG: %[[D:.+]] = ds.constant dense<{{\[\[\[\[}}0.000000e+00]], {{\[\[}}-2.000000e+00]]]]> : tensor<1x2x1x1xf32>
// CHECK: %[[M:.+]] = ds.mul %arg0, %[[A]]
// CHECK: %[[Y:.+]] = ds.add %[[M]], %[[D]]
// CHECK-NOT: ds.div
// CHECK-NOT: ds.sqrt
// CHECK: ds.relu %[[Y]]
func.func @pre_activation(%x: tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x4x3x3xf32>) {
  %m = ds.parameter "m" = dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %v = ds.parameter "v" = dense<[[[4.0]], [[1.0]]]> : tensor<2x1x1xf32>
  %g = ds.parameter "g" = dense<[[[1.0]], [[1.0]]]> : tensor<2x1x1xf32>
  %be = ds.parameter "b" = dense<[[[0.5]], [[0.0]]]> : tensor<2x1x1xf32>
  %eps = ds.constant dense<0.0> : tensor<f32>
  %ve = ds.add %v, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %sd = ds.sqrt %ve : tensor<2x1x1xf32>
  %d = ds.sub %x, %m : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %n = ds.div %d, %sd : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %s = ds.mul %n, %g : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y = ds.add %s, %be : (tensor<1x2x3x3xf32>, tensor<2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %r = ds.relu %y : tensor<1x2x3x3xf32>
  %cat = ds.concat %x, %x {axis = 1 : i64} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %r, %cat : tensor<1x2x3x3xf32>, tensor<1x4x3x3xf32>
}
