// ds-keep-activations-quantized: a quantized convolution whose readers
// are all quantized convolutions rounding it the same way writes uint8.
// RUN: ds-opt %s --ds-keep-activations-quantized -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.+]] = ds.quantized_conv %arg0, %arg1, %arg2 {{.*}}output_scale = 2.500000e-01 : f64, output_zero_point = 3 : i64{{.*}} -> tensor<1x4x4x2xui8>
// CHECK: %[[B:.+]] = ds.quantized_conv %[[A]], %arg1, %arg2 {{.*}}input_scale = 2.500000e-01 : f64, input_zero_point = 3 : i64{{.*}}: (tensor<1x4x4x2xui8>, {{.*}}) -> tensor<1x4x4x2xf32>
// CHECK-NOT: output_scale
// CHECK: return %[[B]]
func.func @chain(%x: tensor<1x4x4x2xf32>, %w: tensor<2x2x1x1xi8>, %s: tensor<2xf32>) -> tensor<1x4x4x2xf32> {
  %a = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %b = ds.quantized_conv %a, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.25 : f64, input_zero_point = 3 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  return %b : tensor<1x4x4x2xf32>
}

// -----

// A reader that needs the f32 values (here an add, as a residual is), or
// two readers rounding differently: the result stays f32.
// CHECK-LABEL: func.func @f32_reader
// CHECK-NOT: ui8
func.func @f32_reader(%x: tensor<1x4x4x2xf32>, %w: tensor<2x2x1x1xi8>, %s: tensor<2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %a = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %b = ds.quantized_conv %a, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.25 : f64, input_zero_point = 3 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %c = ds.add %a, %x : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %d = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %e = ds.quantized_conv %d, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.25 : f64, input_zero_point = 3 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %f = ds.quantized_conv %d, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64, input_scale = 0.125 : f64, input_zero_point = 3 : i64, channels_last} : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %g = ds.add %e, %f : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %b, %c, %g : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}
