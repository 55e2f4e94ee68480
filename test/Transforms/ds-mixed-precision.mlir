// ds-mixed-precision: f32 products read 16-bit operands (cast once per
// value), keep their transpose flags, and hand f32 back to their users; a
// weight only products read is stored in 16 bits; everything else stays f32.
// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=F16
// RUN: not ds-opt %s --ds-mixed-precision=dtype=int8 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @mlp
// CHECK-DAG: %[[W1:.+]] = ds.parameter "w1" = dense<{{.+}}> : tensor<3x2xbf16>
// CHECK-DAG: %[[X:.+]] = ds.cast %arg0 : tensor<4x3xf32> -> tensor<4x3xbf16>
// The shared weight w2 is read by a relu too: it stays f32, cast for the product.
// CHECK-DAG: %[[W2:.+]] = ds.parameter "w2" = dense<{{.+}}> : tensor<2x2xf32>
// CHECK-DAG: %[[W2C:.+]] = ds.cast %[[W2]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK: %[[P:.+]] = ds.matmul %[[X]], %[[W1]] : (tensor<4x3xbf16>, tensor<3x2xbf16>) -> tensor<4x2xbf16>
// CHECK: %[[Y:.+]] = ds.cast %[[P]] : tensor<4x2xbf16> -> tensor<4x2xf32>
// CHECK: %[[R:.+]] = ds.relu %[[Y]] : tensor<4x2xf32>
// CHECK: ds.matmul %{{.+}}, %[[W2C]] {transpose_rhs = true} : (tensor<4x2xbf16>, tensor<2x2xbf16>) -> tensor<4x2xbf16>
// CHECK: ds.relu %{{.+}} : tensor<2x2xf32>
// F16: ds.matmul {{.+}} : (tensor<4x3xf16>, tensor<3x2xf16>) -> tensor<4x2xf16>
// BAD: ds-mixed-precision: dtype must be bf16, fp16 or fp32, got 'int8'
func.func @mlp(%x: tensor<4x3xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>) {
  %w1 = ds.parameter "w1" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %w2 = ds.parameter "w2" = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %h = ds.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %r = ds.relu %h : tensor<4x2xf32>
  %o = ds.matmul %r, %w2 {transpose_rhs = true} : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %z = ds.relu %w2 : tensor<2x2xf32>
  return %o, %z : tensor<4x2xf32>, tensor<2x2xf32>
}

// Integer and f64 products are left alone.
// CHECK-LABEL: func.func @ints
// CHECK: ds.matmul %arg0, %arg1 : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
// CHECK: ds.matmul %arg2, %arg2 : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
func.func @ints(%a: tensor<2x2xi64>, %b: tensor<2x2xi64>, %c: tensor<2x2xf64>) -> (tensor<2x2xi64>, tensor<2x2xf64>) {
  %0 = ds.matmul %a, %b : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %1 = ds.matmul %c, %c : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  return %0, %1 : tensor<2x2xi64>, tensor<2x2xf64>
}

// Convolutions and their gradients too; the bias goes 16-bit with them.
// CHECK-LABEL: func.func @conv
// CHECK: ds.conv {{.+}} : (tensor<1x2x4x4xbf16>, tensor<3x2x3x3xbf16>, tensor<3xbf16>) -> tensor<1x3x2x2xbf16>
// CHECK: ds.conv_grad {{.+}} : (tensor<1x2x4x4xbf16>, tensor<3x2x3x3xbf16>, tensor<1x3x2x2xbf16>) -> (tensor<1x2x4x4xbf16>, tensor<3x2x3x3xbf16>)
func.func @conv(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>, %b: tensor<3xf32>, %dy: tensor<1x3x2x2xf32>)
    -> (tensor<1x3x2x2xf32>, tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) {
  %y = ds.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  %dx, %dw = ds.conv_grad %x, %w, %dy {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<1x3x2x2xf32>) -> (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>)
  return %y, %dx, %dw : tensor<1x3x2x2xf32>, tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>
}
