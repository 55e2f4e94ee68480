// ds-raise-activations: GELU spelled out in elementwise ops, however the
// exporter associated it, becomes one ds.gelu; look-alikes stay.
// RUN: ds-opt %s --ds-raise-activations -split-input-file | FileCheck %s

// The tanh form as PyTorch 2 exports Hugging Face's GPT-2 (9 ops).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NOT: ds.mul
// CHECK: %[[G:.+]] = ds.gelu %arg0 {approximate = #ds<gelu_approximation tanh>} : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = ds.constant dense<0.5> : tensor<f32>
  %c = ds.constant dense<0.044715> : tensor<f32>
  %k = ds.constant dense<0.797884583> : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %h = ds.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %x2 = ds.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x3 = ds.mul %x2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %cx3 = ds.mul %x3, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %in = ds.add %x, %cx3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %kin = ds.mul %in, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = ds.tanh %kin : tensor<4x8xf32>
  %t1 = ds.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = ds.mul %h, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The erf form with a division by sqrt(2) and the half applied last; the
// constant a one-element tensor of rank 1.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NOT: ds.erf
// CHECK: %[[G:.+]] = ds.gelu %arg0 : tensor<2x3x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s2 = ds.constant dense<1.41421354> : tensor<1xf32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %half = ds.constant dense<0.5> : tensor<f32>
  %d = ds.div %x, %s2 : (tensor<2x3x8xf32>, tensor<1xf32>) -> tensor<2x3x8xf32>
  %e = ds.erf %d : tensor<2x3x8xf32>
  %e1 = ds.add %one, %e : (tensor<f32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %m = ds.mul %x, %e1 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = ds.mul %m, %half : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Kept: a wrong coefficient (0.05 for 0.044715 differs by ~1e-3), an
// intermediate read outside the group, and a constant that is an argument.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: ds.gelu
// CHECK: ds.erf
// CHECK: ds.erf
// CHECK: ds.erf
func.func @kept(%x: tensor<8xf32>, %c: tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %k1 = ds.constant dense<0.75> : tensor<f32>
  %k = ds.constant dense<0.707106769> : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %half = ds.constant dense<0.5> : tensor<f32>
  %d1 = ds.mul %x, %k1 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e1 = ds.erf %d1 : tensor<8xf32>
  %a1 = ds.add %e1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m1 = ds.mul %x, %a1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y1 = ds.mul %m1, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d2 = ds.mul %x, %k : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e2 = ds.erf %d2 : tensor<8xf32>
  %a2 = ds.add %e2, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m2 = ds.mul %x, %a2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y2 = ds.mul %m2, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d3 = ds.mul %x, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e3 = ds.erf %d3 : tensor<8xf32>
  %a3 = ds.add %e3, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %m3 = ds.mul %x, %a3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y3 = ds.mul %m3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %y1, %y2, %e2, %y3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// GELU in double, but not in the graph's f32: (x * 1e20) overflows from
// |x| = 3.4e18 (inf, or NaN below zero) where a GELU kernel would not.
// CHECK-LABEL: func.func @overflows_in_f32
// CHECK-NOT: ds.gelu
// CHECK: ds.erf
func.func @overflows_in_f32(%x: tensor<8xf32>) -> tensor<8xf32> {
  %big = ds.constant dense<1.0e20> : tensor<f32>
  %s2 = ds.constant dense<1.41421354> : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %half = ds.constant dense<0.5> : tensor<f32>
  %xb = ds.mul %x, %big : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d = ds.div %x, %s2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e = ds.erf %d : tensor<8xf32>
  %e1 = ds.add %e, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %p = ds.mul %xb, %e1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %h = ds.mul %p, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = ds.div %h, %big : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
