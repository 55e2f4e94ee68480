// Softmax's gradient is one ds.softmax_grad (a row pass: y * (dy - sum(y *
// dy))), not a product, a reduction and an update over the scores; the
// finite-difference check of its values is test/Transforms/gradients.py.
// RUN: ds-opt %s --ds-build-train-step="loss=mse" | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.+]] = ds.softmax %{{.+}} {axis = 1 : i64} : tensor<4x24xf32>
// CHECK: ds.softmax_grad %[[Y]], %{{.+}} {axis = 1 : i64} : tensor<4x24xf32>
// CHECK-NOT: ds.reduce_sum %{{.+}} {axes = array<i64: 1>, keepdims = true}
// CHECK-LABEL: func.func @optimizer_step
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x24xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<0.25> : tensor<3x24xf32>
  %0 = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x24xf32>) -> tensor<4x24xf32>
  %1 = ds.softmax %0 {axis = 1 : i64} : tensor<4x24xf32>
  return %1 : tensor<4x24xf32>
}
