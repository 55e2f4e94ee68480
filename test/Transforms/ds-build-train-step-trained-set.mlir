// Which initializers ds-build-train-step trains. ONNX has no trainable
// flag and PyTorch 2's exporter writes literals (an exponent, a mask's fill
// value) as initializers: by default a float initializer is trained unless
// it has at most one element or the exporter's graph signature calls it a
// buffer (ds.buffer: rotary frequencies); `parameters=` names the set exactly. The
// module records both lists for ds-opt --report.
// RUN: ds-opt %s --ds-build-train-step | FileCheck %s
// RUN: ds-opt %s --ds-build-train-step="parameters=b" | FileCheck %s --check-prefix=ONLY
// RUN: not ds-opt %s --ds-build-train-step="parameters=w,nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: ds-opt %s --loss softmax-cross-entropy --report -o %t.dsplan | FileCheck %s --check-prefix=REPORT

// CHECK: module attributes {ds.constant_initializers = ["exponent", "fill", "inv_freq"], {{.*}}ds.trained_parameters = [{name = "w", shape = array<i64: 3, 2>}, {name = "b", shape = array<i64: 2>}]
// CHECK-DAG: ml_program.global private mutable @"param:w"
// CHECK-DAG: ml_program.global private mutable @"param:b"
// CHECK-NOT: @"param:exponent"
// CHECK-NOT: @"param:fill"
// CHECK-LABEL: func.func @main
// CHECK-DAG: ds.parameter "exponent" = dense<2.000000e+00> : tensor<f32>
// CHECK-DAG: ds.parameter "fill" = dense<-3.40282347E+38> : tensor<1xf32>
// The exponent is a constant: no gradient (no ln(a), NaN for negative a).
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: ds.log
// CHECK-LABEL: func.func @optimizer_step

// ONLY: module attributes {ds.constant_initializers = ["w", "exponent", "fill", "inv_freq"], {{.*}}ds.trained_parameters = [{name = "b", shape = array<i64: 2>}]
// ONLY-NOT: @"param:w"
// ONLY: ml_program.global private mutable @"param:b"
// ONLY-NOT: @"param:w"

// UNKNOWN: --parameters names 'nope', which is not an initializer of the model

// REPORT: trained parameters: 2 tensors, 8 elements
// REPORT-NEXT: w 3x2 6
// REPORT-NEXT: b 2 2
// REPORT-NEXT: held constant: 3 float initializers (literals of at most one element, buffers, no gradient from the loss, --freeze, or not in --parameters): exponent, fill, inv_freq
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x2xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %b = ds.parameter "b" = dense<[0.01, -0.02]> : tensor<2xf32>
  %e = ds.parameter "exponent" = dense<2.0> : tensor<f32>
  %f = ds.parameter "fill" = dense<-3.40282347E+38> : tensor<1xf32>
  %r = ds.parameter "inv_freq" = dense<[1.0, 0.5]> : tensor<2xf32> {ds.buffer}
  %m0 = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %m = ds.mul %m0, %r : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %a = ds.add %m, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %p = ds.pow %a, %e : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %y = ds.max %p, %f : (tensor<4x2xf32>, tensor<1xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
