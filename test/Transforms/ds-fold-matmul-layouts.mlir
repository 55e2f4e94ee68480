// ds-fold-matmul-layouts: f32 products read operands through the transposes
// and reshapes that made them, and write a result read only by a transpose
// in that transpose's layout; the transposes go.
// RUN: ds-opt %s --ds-fold-matmul-layouts -split-input-file | FileCheck %s

// Attention's head split: q [B, T, H*D] read as [B, H, T, D], k as
// [B, H, D, T] (reshapes and transposes both seen through), then the
// weighted sum's heads merged back to [B, T, H, D].
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x6xf32>, %[[K:.+]]: tensor<2x4x6xf32>, %[[V:.+]]: tensor<2x3x4x2xf32>)
// CHECK-NOT: ds.transpose
// CHECK-NOT: ds.reshape
// CHECK: %[[S:.+]] = ds.fused_matmul %[[Q]], %[[K]] {lhs_shape = array<i64: 2, 3, 4, 2>, lhs_strides = array<i64: 24, 2, 6, 1>, rhs_shape = array<i64: 2, 3, 2, 4>, rhs_strides = array<i64: 24, 2, 1, 6>} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x3x4x4xf32>
// CHECK: %[[O:.+]] = ds.fused_matmul %[[S]], %[[V]] {result_shape = array<i64: 2, 3, 4, 2>, result_strides = array<i64: 24, 2, 6, 1>} : (tensor<2x3x4x4xf32>, tensor<2x3x4x2xf32>) -> tensor<2x4x3x2xf32>
// CHECK-NOT: ds.transpose
// CHECK: return %[[O]]
func.func @heads(%q: tensor<2x4x6xf32>, %k: tensor<2x4x6xf32>, %v: tensor<2x3x4x2xf32>) -> tensor<2x4x3x2xf32> {
  %qr = ds.reshape %q : (tensor<2x4x6xf32>) -> tensor<2x4x3x2xf32>
  %qt = ds.transpose %qr {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x2xf32>) -> tensor<2x3x4x2xf32>
  %kr = ds.reshape %k : (tensor<2x4x6xf32>) -> tensor<2x4x3x2xf32>
  %kt = ds.transpose %kr {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x3x2xf32>) -> tensor<2x3x2x4xf32>
  %s = ds.matmul %qt, %kt : (tensor<2x3x4x2xf32>, tensor<2x3x2x4xf32>) -> tensor<2x3x4x4xf32>
  %o = ds.matmul %s, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x2xf32>) -> tensor<2x3x4x2xf32>
  %m = ds.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x2xf32>) -> tensor<2x4x3x2xf32>
  return %m : tensor<2x4x3x2xf32>
}

// -----

// A fused product keeps its epilogue, and its transposed flag becomes part
// of the view; a transpose another op reads stays for that op.
// CHECK-LABEL: func.func @epilogue
// CHECK: %[[T:.+]] = ds.transpose %arg0
// CHECK: ds.fused_matmul %arg0, %arg1 {activation = #ds<activation relu>, alpha = 5.000000e-01 : f64, lhs_shape = array<i64: 3, 2, 4>, lhs_strides = array<i64: 4, 12, 1>}
// CHECK: return {{.*}}, %[[T]]
func.func @epilogue(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>) -> (tensor<3x2x5xf32>, tensor<3x2x4xf32>) {
  %t = ds.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %p = ds.fused_matmul %t, %w {alpha = 0.5 : f64, activation = #ds<activation relu>} : (tensor<3x2x4xf32>, tensor<4x5xf32>) -> tensor<3x2x5xf32>
  return %p, %t : tensor<3x2x5xf32>, tensor<3x2x4xf32>
}

// -----

// A view whose batch cannot merge into its rows would run one GEMM per
// batch entry, each streaming the shared weight (here 2 MB, 4 times): the
// transpose stays, and one GEMM of 4 x 8 rows reads the weight once.
// CHECK-LABEL: func.func @shared_weight
// CHECK: %[[T:.+]] = ds.transpose %arg0
// CHECK: ds.fused_matmul %[[T]], %arg1 :
func.func @shared_weight(%x: tensor<8x4x512xf32>, %w: tensor<512x1024xf32>) -> tensor<4x8x1024xf32> {
  %t = ds.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<8x4x512xf32>) -> tensor<4x8x512xf32>
  %p = ds.fused_matmul %t, %w : (tensor<4x8x512xf32>, tensor<512x1024xf32>) -> tensor<4x8x1024xf32>
  return %p : tensor<4x8x1024xf32>
}

// -----

// A merged result whose unit steps run down its columns (the transpose
// puts the product's rows last) is written as C^T; a product with a bias
// or addend keeps its result transpose (the epilogue's columns would move).
// CHECK-LABEL: func.func @columns
// CHECK: ds.fused_matmul %arg0, %arg1 {result_shape = array<i64: 2, 4, 3>, result_strides = array<i64: 12, 1, 4>} : (tensor<2x4x5xf32>, tensor<2x5x3xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[B:.+]] = ds.fused_matmul %arg0, %arg1 bias %arg2 :
// CHECK: ds.transpose %[[B]]
func.func @columns(%a: tensor<2x4x5xf32>, %b: tensor<2x5x3xf32>, %bias: tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %p = ds.matmul %a, %b : (tensor<2x4x5xf32>, tensor<2x5x3xf32>) -> tensor<2x4x3xf32>
  %t = ds.transpose %p {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %q = ds.fused_matmul %a, %b bias %bias : (tensor<2x4x5xf32>, tensor<2x5x3xf32>, tensor<3xf32>) -> tensor<2x4x3xf32>
  %u = ds.transpose %q {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  return %t, %u : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Left alone: a view with no unit step in its matrix (heads moved last),
// reshapes of dense tensors (already free; a vector made a column too),
// f64 products.
// CHECK-LABEL: func.func @kept
// CHECK: %[[T:.+]] = ds.transpose %arg0
// CHECK: ds.matmul %[[T]], %arg1
// CHECK: %[[R:.+]] = ds.reshape %arg0
// CHECK: ds.matmul %[[R]], %arg2
// CHECK: %[[D:.+]] = ds.transpose %arg3
// CHECK: ds.matmul %[[D]], %arg4
// CHECK: %[[C:.+]] = ds.reshape %arg5
// CHECK: ds.matmul %[[R]], %[[C]]
// CHECK-NOT: ds.fused_matmul
func.func @kept(%x: tensor<2x3x4xf32>, %w: tensor<2x5xf32>, %w4: tensor<4x5xf32>, %y: tensor<2x3x4xf64>, %v: tensor<4x5xf64>, %vec: tensor<4xf32>) -> (tensor<4x3x5xf32>, tensor<6x5xf32>, tensor<3x2x5xf64>, tensor<6x1xf32>) {
  %t = ds.transpose %x {permutation = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %p = ds.matmul %t, %w : (tensor<4x3x2xf32>, tensor<2x5xf32>) -> tensor<4x3x5xf32>
  %r = ds.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %q = ds.matmul %r, %w4 : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %d = ds.transpose %y {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf64>) -> tensor<3x2x4xf64>
  %e = ds.matmul %d, %v : (tensor<3x2x4xf64>, tensor<4x5xf64>) -> tensor<3x2x5xf64>
  %col = ds.reshape %vec : (tensor<4xf32>) -> tensor<4x1xf32>
  %mv = ds.matmul %r, %col : (tensor<6x4xf32>, tensor<4x1xf32>) -> tensor<6x1xf32>
  return %p, %q, %e, %mv : tensor<4x3x5xf32>, tensor<6x5xf32>, tensor<3x2x5xf64>, tensor<6x1xf32>
}

// -----

// The query and key pieces of a fused QKV projection's output are read at
// their offsets in it: the split (nothing else reads it) goes too.
// CHECK-LABEL: func.func @split
// CHECK-NOT: ds.split
// CHECK: ds.fused_matmul %arg0, %arg0 {lhs_offset = 4 : i64, lhs_shape = array<i64: 2, 2, 4, 2>, lhs_strides = array<i64: 48, 2, 12, 1>, rhs_offset = 8 : i64, rhs_shape = array<i64: 2, 2, 2, 4>, rhs_strides = array<i64: 48, 2, 1, 12>}
// CHECK-NOT: ds.split
func.func @split(%x: tensor<2x4x12xf32>) -> tensor<2x2x4x4xf32> {
  %p:3 = ds.split %x {axis = 2 : i64} : (tensor<2x4x12xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %q = ds.reshape %p#1 : (tensor<2x4x4xf32>) -> tensor<2x4x2x2xf32>
  %qt = ds.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x2xf32>) -> tensor<2x2x4x2xf32>
  %k = ds.reshape %p#2 : (tensor<2x4x4xf32>) -> tensor<2x4x2x2xf32>
  %kt = ds.transpose %k {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x2xf32>) -> tensor<2x2x2x4xf32>
  %s = ds.matmul %qt, %kt : (tensor<2x2x4x2xf32>, tensor<2x2x2x4xf32>) -> tensor<2x2x4x4xf32>
  return %s : tensor<2x2x4x4xf32>
}
