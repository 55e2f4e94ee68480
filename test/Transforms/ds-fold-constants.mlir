// ds-fold-constants runs the runtime's CPU kernels on constant operands.
// RUN: ds-opt %s --ds-fold-constants -split-input-file | FileCheck %s

// Shape arithmetic as exporters write it folds to one constant.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.+]] = ds.constant dense<[2, 8, 4, 16]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<4xi64> {
  %shape = ds.constant dense<[2, 8, 64]> : tensor<3xi64>
  %idx = ds.constant dense<[0, 1]> : tensor<2xi64>
  %bt = ds.gather %shape, %idx {axis = 0 : i64} : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %heads = ds.constant dense<[4]> : tensor<1xi64>
  %c64 = ds.constant dense<64> : tensor<i64>
  %c4 = ds.constant dense<4> : tensor<i64>
  %hd = ds.div %c64, %c4 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %hd1 = ds.unsqueeze %hd {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %out = ds.concat %bt, %heads, %hd1 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %out : tensor<4xi64>
}

// -----

// Float math folds with the kernels' arithmetic (sqrt(64) = 8).
// CHECK-LABEL: func.func @float_math
// CHECK-NEXT: ds.constant dense<8.000000e+00> : tensor<f32>
func.func @float_math() -> tensor<f32> {
  %c = ds.constant dense<64.0> : tensor<f32>
  %0 = ds.sqrt %c : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A causal mask built from comparisons folds to booleans.
// CHECK-LABEL: func.func @mask
// CHECK-NEXT: ds.constant dense<{{\[}}[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
func.func @mask() -> tensor<3x3xi1> {
  %r = ds.constant dense<[[0], [1], [2]]> : tensor<3x1xi64>
  %c = ds.constant dense<[0, 1, 2]> : tensor<3xi64>
  %m = ds.greater_equal %r, %c : (tensor<3x1xi64>, tensor<3xi64>) -> tensor<3x3xi1>
  return %m : tensor<3x3xi1>
}

// -----

// Arithmetic on parameters stays (a dequantized int8 weight keeps the
// int8 form the quantized products take).
// CHECK-LABEL: func.func @parameters_stay
// CHECK: ds.parameter
// CHECK: ds.exp
func.func @parameters_stay() -> tensor<2xf32> {
  %p = ds.parameter "w" = dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = ds.exp %p : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A parameter rearranged by the exporter (PyTorch's LSTM gates reordered
// as slices and a concat) folds whatever its size: only such ops read it,
// so it dies and the plan holds the rearranged bytes instead.
// LIMIT-LABEL: func.func @rearranged_weight
// LIMIT-NEXT: %[[C:.+]] = ds.constant dense<[3.000000e+00, 4.000000e+00, 1.000000e+00, 2.000000e+00]> : tensor<4xf32>
// LIMIT-NEXT: return %[[C]]
func.func @rearranged_weight() -> tensor<4xf32> {
  %p = ds.parameter "lstm.weight" = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = ds.slice %p {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2xf32>
  %b = ds.slice %p {starts = array<i64: 2>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2xf32>
  %c = ds.concat %b, %a {axis = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// A parameter another op also reads stays whole: folding its slice would
// store its bytes twice.
// LIMIT-LABEL: func.func @shared_weight
// LIMIT: ds.parameter
// LIMIT: ds.slice
func.func @shared_weight() -> (tensor<2xf32>, tensor<4xf32>) {
  %p = ds.parameter "w" = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = ds.slice %p {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2xf32>
  %e = ds.exp %p : tensor<4xf32>
  return %a, %e : tensor<2xf32>, tensor<4xf32>
}

// -----

// Results above max-elements stay as ops.
// RUN: ds-opt %s --ds-fold-constants=max-elements=2 -split-input-file | FileCheck %s --check-prefix=LIMIT
// LIMIT-LABEL: func.func @limit
// LIMIT: ds.add
// CHECK-LABEL: func.func @limit
// CHECK-NOT: ds.add
func.func @limit() -> tensor<4xi64> {
  %c = ds.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = ds.add %c, %c : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// An out-of-range gather is left for ds-run to report at run time.
// CHECK-LABEL: func.func @bad_index
// CHECK: ds.gather
func.func @bad_index() -> tensor<1xi64> {
  %c = ds.constant dense<[1, 2]> : tensor<2xi64>
  %i = ds.constant dense<[5]> : tensor<1xi64>
  %0 = ds.gather %c, %i {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}
