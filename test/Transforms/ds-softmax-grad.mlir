// Softmax's gradient is one ds.softmax_grad (a row pass: y * (dy - sum(y *
// dy))), not a product, a reduction and an update over the scores; a
// masked_softmax's carries its i1 mask (masked scores get no gradient), an
// additive mask's none. The finite-difference check of the values is
// test/Transforms/gradients.py.
// RUN: ds-opt %s --ds-build-train-step="loss=mse" | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.+]] = ds.softmax %{{.+}} {axis = 1 : i64} : tensor<4x24xf32>
// CHECK: %[[M:.+]] = ds.masked_softmax %[[Y]], %[[C:.+]] {axis = 1 : i64, mask_fill = 0xFFF0000000000000 : f64}
// CHECK: %[[A:.+]] = ds.masked_softmax %[[M]], %{{.+}} {axis = 1 : i64} : (tensor<4x24xf32>, tensor<24xf32>)
// CHECK: %[[DA:.+]] = ds.softmax_grad %[[A]], %{{.+}} {axis = 1 : i64} : (tensor<4x24xf32>, tensor<4x24xf32>) -> tensor<4x24xf32>
// CHECK: %[[DM:.+]] = ds.softmax_grad %[[M]], %[[DA]] mask %[[C]] {axis = 1 : i64} : (tensor<4x24xf32>, tensor<4x24xf32>, tensor<1x24xi1>) -> tensor<4x24xf32>
// CHECK: ds.softmax_grad %[[Y]], %[[DM]] {axis = 1 : i64} : (tensor<4x24xf32>, tensor<4x24xf32>) -> tensor<4x24xf32>
// CHECK-NOT: ds.reduce_sum %{{.+}} {axes = array<i64: 1>, keepdims = true}
// CHECK-LABEL: func.func @optimizer_step
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x24xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<0.25> : tensor<3x24xf32>
  %c = ds.constant dense<[[false, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, true]]> : tensor<1x24xi1>
  %b = ds.constant dense<-1.0> : tensor<24xf32>
  %0 = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x24xf32>) -> tensor<4x24xf32>
  %1 = ds.softmax %0 {axis = 1 : i64} : tensor<4x24xf32>
  %2 = ds.masked_softmax %1, %c {axis = 1 : i64, mask_fill = 0xFFF0000000000000 : f64} : (tensor<4x24xf32>, tensor<1x24xi1>) -> tensor<4x24xf32>
  %3 = ds.masked_softmax %2, %b {axis = 1 : i64} : (tensor<4x24xf32>, tensor<24xf32>) -> tensor<4x24xf32>
  return %3 : tensor<4x24xf32>
}
