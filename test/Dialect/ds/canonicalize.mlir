// Folders and canonicalization patterns of ds ops.
// RUN: ds-opt %s -canonicalize -split-input-file | FileCheck %s

// Identity reshape, transpose, slice, expand, cast and empty reductions fold away.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = ds.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = ds.transpose %x {permutation = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = ds.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = ds.expand %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = ds.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %5 = ds.reduce_sum %x {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A chain of reshapes becomes one; squeeze and unsqueeze become reshapes.
// CHECK-LABEL: func.func @reshapes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[R:.+]] = ds.reshape %[[X]] : (tensor<2x3xf32>) -> tensor<3x2x1xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshapes(%x: tensor<2x3xf32>) -> tensor<3x2x1xf32> {
  %0 = ds.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  %1 = ds.unsqueeze %0 {axes = array<i64: 0>} : (tensor<6xf32>) -> tensor<1x6xf32>
  %2 = ds.squeeze %1 {axes = array<i64: 0>} : (tensor<1x6xf32>) -> tensor<6xf32>
  %3 = ds.reshape %2 : (tensor<6xf32>) -> tensor<3x2x1xf32>
  return %3 : tensor<3x2x1xf32>
}

// -----

// A reshape of a constant is a constant.
// CHECK-LABEL: func.func @reshape_constant
// CHECK-NEXT: %[[C:.+]] = ds.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @reshape_constant() -> tensor<2x2xi64> {
  %c = ds.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = ds.reshape %c : (tensor<4xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// A transpose of the last two dimensions feeding a matmul becomes the
// product's transposed read (no copy); a transpose of other dimensions, or
// of integers (no BLAS), stays; a set flag round-trips.
// CHECK-LABEL: func.func @matmul_transposes
// CHECK: %[[A:.+]] = ds.matmul %arg0, %arg1 {transpose_lhs = true} : (tensor<2x8x4xf32>, tensor<8x5xf32>) -> tensor<2x4x5xf32>
// CHECK: %[[B:.+]] = ds.matmul %arg2, %arg3 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
// CHECK: %[[T:.+]] = ds.transpose %arg4
// CHECK: ds.matmul %[[T]], %arg4 : (tensor<3x3x3xf32>, tensor<3x3x3xf32>)
// CHECK: %[[I:.+]] = ds.transpose %arg5
// CHECK: ds.matmul %[[I]], %arg5 : (tensor<3x2xi64>, tensor<2x3xi64>)
// CHECK: ds.matmul %arg2, %arg3 {transpose_rhs = true}
func.func @matmul_transposes(%a: tensor<2x8x4xf32>, %b: tensor<8x5xf32>, %c: tensor<4x8xf32>,
                             %d: tensor<5x8xf32>, %e: tensor<3x3x3xf32>, %i: tensor<2x3xi64>)
    -> (tensor<2x4x5xf32>, tensor<4x5xf32>, tensor<3x3x3xf32>, tensor<3x3xi64>, tensor<4x5xf32>) {
  %at = ds.transpose %a {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %0 = ds.matmul %at, %b : (tensor<2x4x8xf32>, tensor<8x5xf32>) -> tensor<2x4x5xf32>
  %dt = ds.transpose %d {permutation = array<i64: 1, 0>} : (tensor<5x8xf32>) -> tensor<8x5xf32>
  %1 = ds.matmul %c, %dt : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
  %et = ds.transpose %e {permutation = array<i64: 1, 0, 2>} : (tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  %2 = ds.matmul %et, %e : (tensor<3x3x3xf32>, tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  %it = ds.transpose %i {permutation = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %3 = ds.matmul %it, %i : (tensor<3x2xi64>, tensor<2x3xi64>) -> tensor<3x3xi64>
  %4 = ds.matmul %c, %d {transpose_rhs = true} : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  return %0, %1, %2, %3, %4 : tensor<2x4x5xf32>, tensor<4x5xf32>, tensor<3x3x3xf32>, tensor<3x3xi64>, tensor<4x5xf32>
}

// -----

// pow with a constant integral exponent 1..4 on floats becomes multiplies;
// other exponents, integer bases and broadcasting exponents stay pow.
// CHECK-LABEL: func.func @pow_to_multiplies
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[I:.+]]: tensor<4xi32>)
// CHECK: %[[SQ:.+]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[SQ2:.+]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[CUBE:.+]] = ds.mul %[[SQ2]], %[[X]]
// CHECK: %[[SQ3:.+]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[X4:.+]] = ds.mul %[[SQ3]], %[[SQ3]]
// CHECK: %[[HALF:.+]] = ds.pow %[[X]], %{{.+}} : (tensor<4xf32>, tensor<f32>)
// CHECK: %[[INT:.+]] = ds.pow %[[I]], %{{.+}} : (tensor<4xi32>, tensor<i32>)
// CHECK: %[[WIDE:.+]] = ds.pow %[[X]], %{{.+}} : (tensor<4xf32>, tensor<2x4xf32>)
// CHECK: return %[[X]], %[[SQ]], %[[CUBE]], %[[X4]], %[[HALF]], %[[INT]], %[[WIDE]]
func.func @pow_to_multiplies(%x: tensor<4xf32>, %i: tensor<4xi32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<2x4xf32>) {
  %c1 = ds.constant dense<1.0> : tensor<f32>
  %c2 = ds.constant dense<2.0> : tensor<f32>
  %c3 = ds.constant dense<3.0> : tensor<f32>
  %c4 = ds.constant dense<4.0> : tensor<4xf32>
  %ch = ds.constant dense<0.5> : tensor<f32>
  %ci = ds.constant dense<2> : tensor<i32>
  %cw = ds.constant dense<2.0> : tensor<2x4xf32>
  %0 = ds.pow %x, %c1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = ds.pow %x, %c2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = ds.pow %x, %c3 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = ds.pow %x, %c4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = ds.pow %x, %ch : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %5 = ds.pow %i, %ci : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  %6 = ds.pow %x, %cw : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<2x4xf32>
}

// -----

// PyTorch 2's exporter writes the exponent as a one-element initializer: an
// untrained ds.parameter of one element counts as a constant; a larger one
// does not.
// CHECK-LABEL: func.func @pow_parameter_exponent
// CHECK: %[[SQ:.+]] = ds.mul %arg0, %arg0
// CHECK: %[[CUBE:.+]] = ds.mul %[[SQ]], %arg0
// CHECK: %[[P:.+]] = ds.pow %arg0, %{{.+}} : (tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[CUBE]], %[[P]]
func.func @pow_parameter_exponent(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = ds.parameter "e" = dense<3.0> : tensor<f32>
  %v = ds.parameter "v" = dense<3.0> : tensor<4xf32>
  %0 = ds.pow %x, %e : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = ds.pow %x, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Transposes compose; a pair that undoes itself vanishes.
// CHECK-LABEL: func.func @transpose_pairs
// CHECK-NEXT: %[[T:.+]] = ds.transpose %arg0 {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %arg0, %[[T]]
func.func @transpose_pairs(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %a = ds.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %b = ds.transpose %a {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %c = ds.transpose %a {permutation = array<i64: 1, 0, 2>} : (tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  return %b, %c : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// Rounding to a uint8 grid twice is rounding once: a fake_quantize of a
// value already on its grid (a fake_quantize, or a quantized product that
// rounds as it stores, with the same scale and zero point, seen through
// reshapes and transposes) folds away. Another grid is another rounding.
// CHECK-LABEL: func.func @fake_quantize_twice
// CHECK-NEXT: %[[A:.+]] = ds.fake_quantize %arg0 {scale = 2.500000e-01 : f64, zero_point = 7 : i64}
// CHECK-NEXT: %[[R:.+]] = ds.reshape %[[A]]
// CHECK-NEXT: %[[C:.+]] = ds.fake_quantize %[[R]] {scale = 5.000000e-01 : f64, zero_point = 7 : i64}
// CHECK-NEXT: %[[P:.+]] = ds.quantized_matmul
// CHECK-NEXT: %[[T:.+]] = ds.transpose %[[P]]
// CHECK-NEXT: return %[[R]], %[[C]], %[[T]]
func.func @fake_quantize_twice(%x: tensor<2x8xf32>, %h: tensor<4x8xf32>, %w: tensor<6x8xi8>, %s: tensor<6xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<6x4xf32>) {
  %a = ds.fake_quantize %x {scale = 0.25 : f64, zero_point = 7 : i64} : tensor<2x8xf32>
  %r = ds.reshape %a : (tensor<2x8xf32>) -> tensor<4x4xf32>
  %b = ds.fake_quantize %r {scale = 0.25 : f64, zero_point = 7 : i64} : tensor<4x4xf32>
  %c = ds.fake_quantize %r {scale = 0.5 : f64, zero_point = 7 : i64} : tensor<4x4xf32>
  %p = ds.quantized_matmul %h, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.5 : f64, input_zero_point = 3 : i64, round_scale = 0.125 : f64, round_zero_point = 9 : i64} : (tensor<4x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<4x6xf32>
  %t = ds.transpose %p {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %u = ds.fake_quantize %t {scale = 0.125 : f64, zero_point = 9 : i64} : tensor<6x4xf32>
  return %b, %c, %u : tensor<4x4xf32>, tensor<4x4xf32>, tensor<6x4xf32>
}
