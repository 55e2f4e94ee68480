// ds-fuse-elementwise: chains of elementwise ops on f32/i1 values become one
// ds.fused_elementwise whose body keeps the ops, in order, on single elements.
// RUN: ds-opt %s --ds-fuse-elementwise | FileCheck %s
// RUN: ds-opt %s --ds-fuse-elementwise="max-ops=2" | FileCheck %s --check-prefix=SMALL

// GPT-2's tanh GELU as PyTorch 2 exports it: nine ops, one input tensor and
// four scalars in; one fused op out.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[F:.+]] = ds.fused_elementwise %arg0, %arg1, %arg2, %arg3, %arg4 : (tensor<4x16xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4x16xf32> {
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<f32>, %[[H:.+]]: tensor<f32>, %[[A:.+]]: tensor<f32>, %[[B:.+]]: tensor<f32>, %[[O:.+]]: tensor<f32>):
// CHECK-NEXT: %[[M0:.+]] = ds.mul %[[X]], %[[H]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[SQ:.+]] = ds.mul %[[X]], %[[X]]
// CHECK-NEXT: %[[CU:.+]] = ds.mul %[[SQ]], %[[X]]
// CHECK-NEXT: %[[T0:.+]] = ds.mul %[[CU]], %[[A]]
// CHECK-NEXT: %[[T1:.+]] = ds.add %[[X]], %[[T0]]
// CHECK-NEXT: %[[T2:.+]] = ds.mul %[[T1]], %[[B]]
// CHECK-NEXT: %[[T3:.+]] = ds.tanh %[[T2]] : tensor<f32>
// CHECK-NEXT: %[[T4:.+]] = ds.add %[[T3]], %[[O]]
// CHECK-NEXT: %[[R:.+]] = ds.mul %[[M0]], %[[T4]]
// CHECK-NEXT: ds.yield %[[R]] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
// SMALL-LABEL: func.func @gelu_tanh
// SMALL-COUNT-4: ds.fused_elementwise
// SMALL-NOT: ds.fused_elementwise
// SMALL: return
func.func @gelu_tanh(%x: tensor<4x16xf32>, %half: tensor<f32>, %a: tensor<f32>, %b: tensor<f32>, %one: tensor<f32>) -> tensor<4x16xf32> {
  %0 = ds.mul %x, %half : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %1 = ds.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = ds.mul %1, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = ds.mul %2, %a : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %4 = ds.add %x, %3 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %5 = ds.mul %4, %b : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %6 = ds.tanh %5 : tensor<4x16xf32>
  %7 = ds.add %6, %one : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %8 = ds.mul %0, %7 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %8 : tensor<4x16xf32>
}

// Predicates and selects: i1 values flow inside the body; the softmax is
// not elementwise and stays outside.
// CHECK-LABEL: func.func @nan_to_zero
// CHECK: %[[S:.+]] = ds.softmax
// CHECK-NEXT: ds.fused_elementwise %[[S]], %arg1 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// CHECK: ds.is_nan %{{.+}} : tensor<f32> -> tensor<i1>
// CHECK-NEXT: ds.where %{{.+}} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
func.func @nan_to_zero(%x: tensor<2x8xf32>, %zero: tensor<f32>) -> tensor<2x8xf32> {
  %s = ds.softmax %x {axis = 1 : i64} : tensor<2x8xf32>
  %n = ds.is_nan %s : tensor<2x8xf32> -> tensor<2x8xi1>
  %w = ds.where %n, %zero, %s : (tensor<2x8xi1>, tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %w : tensor<2x8xf32>
}

// A value read outside the chain stays a separate op (its result is
// needed anyway); the chain reads it as an input.
// CHECK-LABEL: func.func @shared_value
// CHECK: %[[E:.+]] = ds.exp %arg0
// CHECK-NEXT: %[[F:.+]] = ds.fused_elementwise %[[E]] :
// CHECK: ds.neg
// CHECK-NEXT: ds.sigmoid
// CHECK: return %[[E]], %[[F]]
func.func @shared_value(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = ds.exp %x : tensor<8xf32>
  %n = ds.neg %e : tensor<8xf32>
  %s = ds.sigmoid %n : tensor<8xf32>
  return %e, %s : tensor<8xf32>, tensor<8xf32>
}

// A producer with a smaller (broadcast) result would be recomputed for
// every element it broadcasts to; it stays outside. So do ops on types the
// fused kernel does not compute in (i64), and lone ops.
// CHECK-LABEL: func.func @boundaries
// CHECK: %[[R:.+]] = ds.reciprocal %arg1 : tensor<4x1xf32>
// CHECK-NEXT: %[[F:.+]] = ds.fused_elementwise %arg0, %[[R]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK: ds.add %arg2, %arg2 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: ds.relu %arg3
// CHECK-NOT: fused_elementwise
// CHECK: return
func.func @boundaries(%x: tensor<4x8xf32>, %d: tensor<4x1xf32>, %i: tensor<4xi64>, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xi64>, tensor<8xf32>) {
  %r = ds.reciprocal %d : tensor<4x1xf32>
  %m = ds.mul %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %t = ds.tanh %m : tensor<4x8xf32>
  %a = ds.add %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %b = ds.relu %y : tensor<8xf32>
  return %t, %a, %b : tensor<4x8xf32>, tensor<4xi64>, tensor<8xf32>
}

// A chain whose result is i1 (a mask), with casts between f32 and i1.
// CHECK-LABEL: func.func @mask
// CHECK: ds.fused_elementwise %arg0, %arg1 : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xi1>
// CHECK: ds.cast %{{.+}} : tensor<i1> -> tensor<f32>
// CHECK: ds.yield %{{.+}} : tensor<i1>
func.func @mask(%x: tensor<3x5xf32>, %t: tensor<f32>) -> tensor<3x5xi1> {
  %l = ds.less %x, %t : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xi1>
  %c = ds.cast %l : tensor<3x5xi1> -> tensor<3x5xf32>
  %g = ds.greater %c, %t : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xi1>
  %n = ds.not %g : tensor<3x5xi1>
  return %n : tensor<3x5xi1>
}
