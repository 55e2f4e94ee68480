// ds-raise-quantized-matmul: onnxruntime's quantize_dynamic chain
// (DynamicQuantizeLinear, MatMulInteger, Cast, Mul), as the importer writes
// it, becomes one ds.quantized_matmul with dynamic_per_tensor activations.
// RUN: ds-opt %s --ds-raise-quantized-matmul -split-input-file | FileCheck %s

// The weight's zero point (0) still subtracted as an op, its scale one per
// column: all of it folds into the new op's constants (weight transposed).
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NOT: ds.dynamic_quantize
// CHECK: %[[W:.+]] = ds.constant dense<{{\[\[}}1, 3, 5], [-2, 4, -6]]> : tensor<2x3xi8>
// CHECK: %[[S:.+]] = ds.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ds.quantized_matmul %[[X]], %[[W]], %[[S]] {activation_quant = #ds<activation_quant dynamic_per_tensor>}
// CHECK-SAME: (tensor<2x3xf32>, tensor<2x3xi8>, tensor<2xf32>) -> tensor<2x2xf32>
// CHECK-NOT: ds.matmul
// CHECK: return %[[Y]]
func.func @dynamic(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %q, %s, %z = ds.dynamic_quantize %x : (tensor<2x3xf32>) -> (tensor<2x3xui8>, tensor<f32>, tensor<ui8>)
  %wq = ds.constant dense<[[1, -2], [3, 4], [5, -6]]> : tensor<3x2xi8>
  %wz = ds.constant dense<0> : tensor<i32>
  %ws = ds.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %qi = ds.cast %q : tensor<2x3xui8> -> tensor<2x3xi32>
  %zi = ds.cast %z : tensor<ui8> -> tensor<i32>
  %a = ds.sub %qi, %zi : (tensor<2x3xi32>, tensor<i32>) -> tensor<2x3xi32>
  %wi = ds.cast %wq : tensor<3x2xi8> -> tensor<3x2xi32>
  %b = ds.sub %wi, %wz : (tensor<3x2xi32>, tensor<i32>) -> tensor<3x2xi32>
  %p = ds.matmul %a, %b : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  %pf = ds.cast %p : tensor<2x2xi32> -> tensor<2x2xf32>
  %sc = ds.mul %s, %ws : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
  %y = ds.mul %pf, %sc : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// A weight whose zero point leaves values past int8 (uint8 weights, zero
// point 0) stays an integer product.
// CHECK-LABEL: func.func @wide
// CHECK-NOT: ds.quantized_matmul
// CHECK: ds.matmul
func.func @wide(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %q, %s, %z = ds.dynamic_quantize %x : (tensor<2x3xf32>) -> (tensor<2x3xui8>, tensor<f32>, tensor<ui8>)
  %b = ds.constant dense<[[200, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
  %ws = ds.constant dense<0.5> : tensor<f32>
  %qi = ds.cast %q : tensor<2x3xui8> -> tensor<2x3xi32>
  %zi = ds.cast %z : tensor<ui8> -> tensor<i32>
  %a = ds.sub %qi, %zi : (tensor<2x3xi32>, tensor<i32>) -> tensor<2x3xi32>
  %p = ds.matmul %a, %b : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  %pf = ds.cast %p : tensor<2x2xi32> -> tensor<2x2xf32>
  %sc = ds.mul %s, %ws : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %y = ds.mul %pf, %sc : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// A product whose weight is an int8 constant dequantized as it is read
// (DequantizeLinear: cast, zero point, scale; here through a transpose, as
// onnxruntime leaves an embedding tied to the LM head): weight-only
// quantized_matmul reading the int8 values; the constant still serves the
// gather.
// CHECK-LABEL: func.func @dequantized_weight
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<2xi64>)
// CHECK: %[[Q:.+]] = ds.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6]]> : tensor<2x3xi8>
// CHECK: %[[G:.+]] = ds.gather %[[Q]], %[[I]]
// CHECK: %[[W:.+]] = ds.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6]]> : tensor<2x3xi8>
// CHECK: %[[S:.+]] = ds.constant dense<2.500000e-01> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ds.quantized_matmul %[[X]], %[[W]], %[[S]] : (tensor<2x3xf32>, tensor<2x3xi8>, tensor<2xf32>) -> tensor<2x2xf32>
// CHECK-NOT: ds.transpose
// CHECK: return %[[Y]], %[[G]]
func.func @dequantized_weight(%x: tensor<2x3xf32>, %i: tensor<2xi64>) -> (tensor<2x2xf32>, tensor<2x3xi8>) {
  %q = ds.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi8>
  %g = ds.gather %q, %i {axis = 0 : i64} : (tensor<2x3xi8>, tensor<2xi64>) -> tensor<2x3xi8>
  %t = ds.transpose %q {permutation = array<i64: 1, 0>} : (tensor<2x3xi8>) -> tensor<3x2xi8>
  %f = ds.cast %t : tensor<3x2xi8> -> tensor<3x2xf32>
  %s = ds.constant dense<0.25> : tensor<f32>
  %w = ds.mul %f, %s : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %y = ds.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  return %y, %g : tensor<2x2xf32>, tensor<2x3xi8>
}

// -----

// uint8 weights with a zero point per column: shifted to int8 (value and
// zero point alike).
// CHECK-LABEL: func.func @uint8_weight
// CHECK: %[[W:.+]] = ds.constant dense<{{\[\[}}-127, -125], [-126, -124]]> : tensor<2x2xi8>
// CHECK: %[[S:.+]] = ds.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK: %[[Z:.+]] = ds.constant dense<[-118, 2]> : tensor<2xi8>
// CHECK: ds.quantized_matmul %{{.+}}, %[[W]], %[[S]] zero_point %[[Z]]
func.func @uint8_weight(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %q = ds.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xui8>
  %z = ds.constant dense<[10.0, 130.0]> : tensor<2xf32>
  %s = ds.constant dense<[0.5, 1.0]> : tensor<2xf32>
  %f = ds.cast %q : tensor<2x2xui8> -> tensor<2x2xf32>
  %c = ds.sub %f, %z : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %w = ds.mul %c, %s : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %y = ds.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
