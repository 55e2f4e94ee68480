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

// -----

// A QDQ product (onnxruntime's quantize_static): QuantizeLinear then
// DequantizeLinear of the activations (uint8, zero point 3), a weight
// folded to f32 integers times per-column scales. The op reads x and
// rounds it itself with the same scale and zero point; the round trip
// goes with it.
// CHECK-LABEL: func.func @qdq_matmul
// CHECK-SAME: (%[[X:.+]]: tensor<4x3xf32>)
// CHECK-DAG: %[[W:.+]] = ds.constant dense<{{\[\[}}1, -3, 5], [-2, 4, 6]]> : tensor<2x3xi8>
// CHECK-DAG: %[[S:.+]] = ds.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ds.quantized_matmul %[[X]], %[[W]], %[[S]] {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 1.250000e-01 : f64, input_zero_point = 3 : i64}
// CHECK-NOT: ds.round
// CHECK: return %[[Y]]
func.func @qdq_matmul(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %s = ds.constant dense<0.125> : tensor<f32>
  %z = ds.constant dense<3.0> : tensor<f32>
  %lo = ds.constant dense<0.0> : tensor<f32>
  %hi = ds.constant dense<255.0> : tensor<f32>
  %d = ds.div %x, %s : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %r = ds.round %d : tensor<4x3xf32>
  %a = ds.add %r, %z : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %m = ds.max %a, %lo : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %n = ds.min %m, %hi : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %q = ds.cast %n : tensor<4x3xf32> -> tensor<4x3xui8>
  %qf = ds.cast %q : tensor<4x3xui8> -> tensor<4x3xf32>
  %c = ds.sub %qf, %z : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %xd = ds.mul %c, %s : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %wq = ds.constant dense<[[1.0, -3.0, 5.0], [-2.0, 4.0, 6.0]]> : tensor<2x3xf32>
  %ws = ds.constant dense<[[0.5], [0.25]]> : tensor<2x1xf32>
  %w = ds.mul %ws, %wq : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = ds.matmul %xd, %w {transpose_rhs = true} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Activations that arrive as integers (QLinearMatMul's uint8 input): the op
// reads the centered values as floats (scale 1, the zero point back on
// in the u8 domain) and the activation scale joins the weight's.
// CHECK-LABEL: func.func @integer_input
// CHECK-SAME: (%[[Q:.+]]: tensor<4x3xi8>)
// CHECK: %[[F:.+]] = ds.cast %[[Q]] : tensor<4x3xi8> -> tensor<4x3xf32>
// CHECK: %[[C:.+]] = ds.sub %[[F]]
// CHECK: %[[S:.+]] = ds.constant dense<[1.000000e+00, 5.000000e-01]> : tensor<2xf32>
// CHECK: ds.quantized_matmul %[[C]], %{{.+}}, %[[S]] {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 1.000000e+00 : f64, input_zero_point = 126 : i64}
func.func @integer_input(%q: tensor<4x3xi8>) -> tensor<4x2xf32> {
  %s = ds.constant dense<2.0> : tensor<f32>
  %z = ds.constant dense<-2.0> : tensor<f32>
  %qf = ds.cast %q : tensor<4x3xi8> -> tensor<4x3xf32>
  %c = ds.sub %qf, %z : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %xd = ds.mul %c, %s : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %wq = ds.constant dense<[[1, -3, 5], [-2, 4, 6]]> : tensor<2x3xi8>
  %wf = ds.cast %wq : tensor<2x3xi8> -> tensor<2x3xf32>
  %ws = ds.constant dense<[[0.5], [0.25]]> : tensor<2x1xf32>
  %w = ds.mul %wf, %ws : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %y = ds.matmul %xd, %w {transpose_rhs = true} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A QDQ convolution (per-output-channel weight scales laid [M, 1, 1, 1],
// the int32 bias already dequantized): ds.quantized_conv on x with the
// activations' scale and zero point, the geometry and bias carried over.
// The output's QuantizeLinear/DequantizeLinear pair becomes one
// ds.fake_quantize (uint8 grid: scale 0.25, zero point 0).
// CHECK-LABEL: func.func @qdq_conv
// CHECK-SAME: (%[[X:.+]]: tensor<1x2x4x4xf32>, %[[B:.+]]: tensor<2xf32>)
// CHECK-DAG: %[[W:.+]] = ds.constant dense<{{.+}}> : tensor<2x2x3x3xi8>
// CHECK-DAG: %[[S:.+]] = ds.constant dense<[1.000000e-01, 2.000000e-01]> : tensor<2xf32>
// CHECK: %[[Y:.+]] = ds.quantized_conv %[[X]], %[[W]], %[[S]] bias %[[B]] {dilations = array<i64: 1, 1>, group = 1 : i64, input_scale = 5.000000e-01 : f64, input_zero_point = 128 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: %[[F:.+]] = ds.fake_quantize %[[Y]] {scale = 2.500000e-01 : f64, zero_point = 0 : i64} : tensor<1x2x2x2xf32>
// CHECK-NOT: ds.round
// CHECK: return %[[F]]
func.func @qdq_conv(%x: tensor<1x2x4x4xf32>, %b: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
  %s = ds.constant dense<0.5> : tensor<f32>
  %z = ds.constant dense<0.0> : tensor<f32>
  %lo = ds.constant dense<-128.0> : tensor<f32>
  %hi = ds.constant dense<127.0> : tensor<f32>
  %d = ds.div %x, %s : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %r = ds.round %d : tensor<1x2x4x4xf32>
  %m = ds.max %r, %lo : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %n = ds.min %m, %hi : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %q = ds.cast %n : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xi8>
  %qf = ds.cast %q : tensor<1x2x4x4xi8> -> tensor<1x2x4x4xf32>
  %xd = ds.mul %qf, %s : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %wq = ds.constant dense<3.0> : tensor<2x2x3x3xf32>
  %ws = ds.constant dense<[[[[0.1]]], [[[0.2]]]]> : tensor<2x1x1x1xf32>
  %w = ds.mul %wq, %ws : (tensor<2x2x3x3xf32>, tensor<2x1x1x1xf32>) -> tensor<2x2x3x3xf32>
  %y = ds.conv %xd, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %ys = ds.constant dense<0.25> : tensor<f32>
  %yz = ds.constant dense<0.0> : tensor<f32>
  %ymax = ds.constant dense<255.0> : tensor<f32>
  %yd = ds.div %y, %ys : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %yr = ds.round %yd : tensor<1x2x2x2xf32>
  %ym = ds.max %yr, %yz : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %yn = ds.min %ym, %ymax : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %yq = ds.cast %yn : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xui8>
  %yf = ds.cast %yq : tensor<1x2x2x2xui8> -> tensor<1x2x2x2xf32>
  %yc = ds.sub %yf, %yz : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %out = ds.mul %yc, %ys : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  return %out : tensor<1x2x2x2xf32>
}

// -----

// A weight with a nonzero zero point (asymmetric) stays an f32 convolution:
// the int8 kernel takes symmetric weights.
// CHECK-LABEL: func.func @asymmetric_weight
// CHECK-NOT: ds.quantized_conv
// CHECK: ds.conv
func.func @asymmetric_weight(%q: tensor<1x2x4x4xui8>) -> tensor<1x2x2x2xf32> {
  %s = ds.constant dense<0.5> : tensor<f32>
  %qf = ds.cast %q : tensor<1x2x4x4xui8> -> tensor<1x2x4x4xf32>
  %xd = ds.mul %qf, %s : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %wq = ds.constant dense<3> : tensor<2x2x3x3xi8>
  %wf = ds.cast %wq : tensor<2x2x3x3xi8> -> tensor<2x2x3x3xf32>
  %wz = ds.constant dense<1.0> : tensor<f32>
  %wc = ds.sub %wf, %wz : (tensor<2x2x3x3xf32>, tensor<f32>) -> tensor<2x2x3x3xf32>
  %ws = ds.constant dense<0.1> : tensor<f32>
  %w = ds.mul %wc, %ws : (tensor<2x2x3x3xf32>, tensor<f32>) -> tensor<2x2x3x3xf32>
  %y = ds.conv %xd, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// -----

// A pair with one scale per channel is no ds.fake_quantize (which takes
// one): it stays f32 ops, its exact casts elided.
// CHECK-LABEL: func.func @per_channel_pair
// CHECK-NOT: ds.fake_quantize
// CHECK-NOT: ds.cast
// CHECK: ds.round
func.func @per_channel_pair(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %s = ds.constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %lo = ds.constant dense<0.0> : tensor<f32>
  %hi = ds.constant dense<255.0> : tensor<f32>
  %d = ds.div %x, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = ds.round %d : tensor<2x3xf32>
  %m = ds.max %r, %lo : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %n = ds.min %m, %hi : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %q = ds.cast %n : tensor<2x3xf32> -> tensor<2x3xui8>
  %qf = ds.cast %q : tensor<2x3xui8> -> tensor<2x3xf32>
  %y = ds.mul %qf, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A round trip read only by quantized products that round their input to
// the same grid themselves (static_per_tensor, the same scale and zero
// point), here through a reshape, goes: the products round the unrounded
// value to the same integers. One with another reader stays.
// CHECK-LABEL: func.func @requantized_round_trip
// CHECK-NOT: ds.fake_quantize %arg0
// CHECK: %[[R:.+]] = ds.reshape %arg0
// CHECK: ds.quantized_matmul %[[R]]
// CHECK: %[[K:.+]] = ds.fake_quantize %arg1 {scale = 1.250000e-01 : f64, zero_point = 3 : i64}
// CHECK: ds.quantized_matmul %[[K]]
// CHECK: return
func.func @requantized_round_trip(%x: tensor<2x2x8xf32>, %v: tensor<4x8xf32>, %w: tensor<6x8xi8>, %s: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x8xf32>) {
  %g = ds.fake_quantize %x {scale = 0.125 : f64, zero_point = 3 : i64} : tensor<2x2x8xf32>
  %r = ds.reshape %g : (tensor<2x2x8xf32>) -> tensor<4x8xf32>
  %y = ds.quantized_matmul %r, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.125 : f64, input_zero_point = 3 : i64} : (tensor<4x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<4x6xf32>
  %k = ds.fake_quantize %v {scale = 0.125 : f64, zero_point = 3 : i64} : tensor<4x8xf32>
  %z = ds.quantized_matmul %k, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.125 : f64, input_zero_point = 3 : i64} : (tensor<4x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<4x6xf32>
  return %y, %z, %k : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x8xf32>
}
