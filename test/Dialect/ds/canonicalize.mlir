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
