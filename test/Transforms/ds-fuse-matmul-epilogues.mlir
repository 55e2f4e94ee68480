// ds-fuse-matmul-epilogues: scale, bias, activation and an addend that only
// post-process a product become its ds.fused_matmul.
// RUN: ds-opt %s --ds-fuse-matmul-epilogues -split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-fuse-matmul-epilogues="row-epilogues=false" -split-input-file | FileCheck %s --check-prefix=NOROW

// The whole chain, in order: scale, bias, GELU, residual add.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<8x16xf32>, %[[B:.+]]: tensor<16xf32>, %[[R:.+]]: tensor<4x16xf32>)
// CHECK: %[[Y:.+]] = ds.fused_matmul %[[X]], %[[W]] bias %[[B]] addend %[[R]] {activation = #ds<activation gelu_tanh>, alpha = 5.000000e-01 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @chain(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %r: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %two = ds.constant dense<2.0> : tensor<f32>
  %p = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = ds.div %p, %two : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %a = ds.add %b, %s : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = ds.gelu %a {approximate = #ds<gelu_approximation tanh>} : tensor<4x16xf32>
  %y = ds.add %g, %r : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Llama's MLP: SiLU (x * sigmoid(x)) on the gate, multiplied by the up
// projection (whose [1, N] bias becomes [N]): the gate product takes the
// activation and the multiply, the up product its bias.
// CHECK-LABEL: func.func @gate
// CHECK: %[[BR:.+]] = ds.reshape %arg3 : (tensor<1x16xf32>) -> tensor<16xf32>
// CHECK: %[[U:.+]] = ds.fused_matmul %arg0, %arg2 bias %[[BR]] :
// CHECK: %[[G:.+]] = ds.fused_matmul %arg0, %arg1 addend %[[U]] {activation = #ds<activation silu>, combine = #ds<combine mul>}
// CHECK-NOT: ds.sigmoid
// CHECK: return %[[G]]
func.func @gate(%x: tensor<4x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>, %bu: tensor<1x16xf32>) -> tensor<4x16xf32> {
  %g = ds.matmul %x, %wg : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = ds.sigmoid %g : tensor<4x16xf32>
  %silu = ds.mul %g, %s : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = ds.matmul %x, %wu : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %ub = ds.add %u, %bu : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  %y = ds.mul %ub, %silu : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A 2-D product reshaped to 3-D before the residual add (ONNX Gemm then
// Reshape): the fused op computes in the product's shape, the residual is
// reshaped to it and the result back. relu as max(x, 0) with a transposed
// weight.
// CHECK-LABEL: func.func @reshaped
// CHECK: %[[R2:.+]] = ds.reshape %arg2 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[Y:.+]] = ds.fused_matmul %arg0, %arg1 addend %[[R2]] {activation = #ds<activation relu>, transpose_rhs = true}
// CHECK: %[[Y3:.+]] = ds.reshape %[[Y]] : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK: return %[[Y3]]
func.func @reshaped(%x: tensor<8x8xf32>, %w: tensor<16x8xf32>, %r: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %zero = ds.constant dense<0.0> : tensor<f32>
  %p = ds.matmul %x, %w {transpose_rhs = true} : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = ds.max %p, %zero : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %v = ds.reshape %m : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %y = ds.add %v, %r : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Training: the weight gradient added into its accumulator (the add the
// optimizer's global_store keeps) becomes the product's addend.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[ACC:.+]] = ml_program.global_load @acc
// CHECK: %[[Y:.+]] = ds.fused_matmul %arg0, %arg1 addend %[[ACC]] {transpose_lhs = true}
// CHECK: ml_program.global_store @acc = %[[Y]]
ml_program.global private mutable @acc(dense<0.0> : tensor<8x16xf32>) : tensor<8x16xf32>
func.func @accumulate(%x: tensor<4x8xf32>, %dy: tensor<4x16xf32>) {
  %acc = ml_program.global_load @acc : tensor<8x16xf32>
  %g = ds.matmul %x, %dy {transpose_lhs = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %s = ds.add %acc, %g : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  ml_program.global_store @acc = %s : tensor<8x16xf32>
  return
}

// -----

// Not fused: a bias after the activation and an add that broadcasts the
// result larger (the activation before them is), a scale that is not a
// known constant, a matrix-vector product, and f64. A product read twice
// (the backward needs it) keeps its activation's input as a second result.
// CHECK-LABEL: func.func @kept
// CHECK: %{{.+}}, %{{.+}} = ds.fused_matmul %arg0, %arg1 {activation = #ds<activation relu>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NEXT: %[[F2:.+]] = ds.fused_matmul %arg0, %arg1 {activation = #ds<activation relu>}
// CHECK-NEXT: ds.add %[[F2]], %arg2
// CHECK-NEXT: %[[F3:.+]] = ds.fused_matmul %arg0, %arg1 {activation = #ds<activation relu>}
// CHECK-NEXT: ds.add %[[F3]], %arg3
// CHECK-NEXT: %[[P4:.+]] = ds.matmul %arg0, %arg1
// CHECK-NEXT: ds.mul %[[P4]], %arg4
// CHECK-NEXT: %[[MV:.+]] = ds.matmul %arg0, %arg5
// CHECK-NEXT: ds.relu %[[MV]]
// CHECK-NEXT: %[[PD:.+]] = ds.matmul %arg6, %arg7
// CHECK-NEXT: ds.relu %[[PD]]
func.func @kept(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %wide: tensor<2x4x16xf32>,
                %t: tensor<f32>, %v: tensor<8xf32>, %xd: tensor<4x8xf64>, %wd: tensor<8x16xf64>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf64>) {
  %p1 = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r1 = ds.relu %p1 : tensor<4x16xf32>
  %p2 = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r2 = ds.relu %p2 : tensor<4x16xf32>
  %b2 = ds.add %r2, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %p3 = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r3 = ds.relu %p3 : tensor<4x16xf32>
  %y3 = ds.add %r3, %wide : (tensor<4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %p4 = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s4 = ds.mul %p4, %t : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %mv = ds.matmul %x, %v : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %mvr = ds.relu %mv : tensor<4xf32>
  %pd = ds.matmul %xd, %wd : (tensor<4x8xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>
  %rd = ds.relu %pd : tensor<4x16xf64>
  return %p1, %r1, %b2, %y3, %s4, %mvr, %rd : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf64>
}

// -----

// A scaled operand read only by products (the scaled gradient of attention
// scores): each product reads it unscaled with the scale in alpha, and the
// multiply goes. A scaled operand read elsewhere too is kept.
// CHECK-LABEL: func.func @operand_scale
// CHECK-SAME: (%[[D:.+]]: tensor<2x4x4xf32>, %[[K:.+]]: tensor<2x4x8xf32>, %[[Q:.+]]: tensor<2x8x4xf32>, %[[E:.+]]: tensor<2x4x4xf32>)
// CHECK-NOT: ds.mul %[[D]]
// CHECK-DAG: ds.fused_matmul %[[D]], %[[K]] {alpha = 1.250000e-01 : f64}
// CHECK-DAG: ds.fused_matmul %[[Q]], %[[D]] {alpha = 1.250000e-01 : f64}
// CHECK-DAG: %[[S:.+]] = ds.mul %[[E]]
// CHECK-DAG: ds.matmul %[[S]], %[[K]]
func.func @operand_scale(%d: tensor<2x4x4xf32>, %k: tensor<2x4x8xf32>, %q: tensor<2x8x4xf32>, %e: tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %c = ds.constant dense<0.125> : tensor<f32>
  %s = ds.mul %d, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %dq = ds.matmul %s, %k : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dk = ds.matmul %q, %s : (tensor<2x8x4xf32>, tensor<2x4x4xf32>) -> tensor<2x8x4xf32>
  %t = ds.mul %e, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %o = ds.matmul %t, %k : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %dq, %dk, %o, %t : tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// An MLP's backward: the product is the dy of a ds.gelu_grad (tanh form),
// whose operand (the forward's pre-activation) becomes the addend.
// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: (%[[G:.+]]: tensor<6x4xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[H:.+]]: tensor<6x8xf32>)
// CHECK: %[[Y:.+]] = ds.fused_matmul %[[G]], %[[W]] addend %[[H]] {combine = #ds<combine gelu_tanh_grad>, transpose_rhs = true}
// CHECK-NEXT: return %[[Y]]
func.func @gelu_grad(%g: tensor<6x4xf32>, %w: tensor<8x4xf32>, %h: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %dy = ds.matmul %g, %w {transpose_rhs = true} : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
  %dx = ds.gelu_grad %h, %dy {approximate = #ds<gelu_approximation tanh>} : tensor<6x8xf32>
  return %dx : tensor<6x8xf32>
}

// -----

// Attention's scores: a scaled product read only by a masked softmax over
// its last axis becomes one fused product that normalizes its rows (the
// mask and fill carried over); a plain softmax likewise, without a mask.
// CHECK-LABEL: func.func @scores_softmax
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x8xf32>, %[[K:.+]]: tensor<2x4x8xf32>, %[[M:.+]]: tensor<1x4x4xi1>, %[[A:.+]]: tensor<4x4xf32>)
// CHECK: %[[P:.+]] = ds.fused_matmul %[[Q]], %[[K]] mask %[[M]] {alpha = 1.250000e-01 : f64, mask_fill = 0xFFF0000000000000 : f64, softmax, transpose_rhs = true}
// CHECK-NEXT: %[[R:.+]] = ds.fused_matmul %[[Q]], %[[K]] mask %[[A]] {softmax, transpose_rhs = true}
// CHECK-NEXT: %[[S:.+]] = ds.fused_matmul %[[Q]], %[[K]] {softmax, transpose_rhs = true}
// CHECK-NEXT: return %[[P]], %[[R]], %[[S]]
// NOROW-LABEL: func.func @scores_softmax
// NOROW-COUNT-2: ds.masked_softmax
// NOROW: ds.softmax
func.func @scores_softmax(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %m: tensor<1x4x4xi1>, %a: tensor<4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %c = ds.constant dense<0.125> : tensor<f32>
  %s = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %t = ds.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = ds.masked_softmax %t, %m {axis = 2 : i64, mask_fill = 0xFFF0000000000000 : f64} : (tensor<2x4x4xf32>, tensor<1x4x4xi1>) -> tensor<2x4x4xf32>
  %s2 = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %r = ds.masked_softmax %s2, %a {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %s3 = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %sm = ds.softmax %s3 {axis = 2 : i64} : tensor<2x4x4xf32>
  return %p, %r, %sm : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Not fused: a softmax over another axis, a product read also elsewhere,
// a softmax after a bias (the row epilogue follows only a scale), and a
// softmax of a reshaped product (its mask broadcasts to the reshaped shape).
// CHECK-LABEL: func.func @scores_softmax_kept
// CHECK-COUNT-3: ds.softmax
// CHECK: ds.masked_softmax
func.func @scores_softmax_kept(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %b: tensor<4xf32>, %m: tensor<1x2x4x4xi1>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %s = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %p = ds.softmax %s {axis = 1 : i64} : tensor<2x4x4xf32>
  %s2 = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %p2 = ds.softmax %s2 {axis = 2 : i64} : tensor<2x4x4xf32>
  %s3 = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %t3 = ds.add %s3, %b : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %p3 = ds.softmax %t3 {axis = 2 : i64} : tensor<2x4x4xf32>
  %s4 = ds.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %r4 = ds.reshape %s4 : (tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p4 = ds.masked_softmax %r4, %m {axis = 3 : i64, mask_fill = -1.0e+04 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xi1>) -> tensor<1x2x4x4xf32>
  return %p, %p2, %s2, %p3, %p4 : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Their backward: the product is the dy of a ds.softmax_grad (masked),
// whose softmax result becomes the addend. Not when the product is the
// softmax operand itself.
// CHECK-LABEL: func.func @scores_softmax_grad
// CHECK-SAME: (%[[G:.+]]: tensor<2x4x8xf32>, %[[V:.+]]: tensor<2x4x8xf32>, %[[Y:.+]]: tensor<2x4x4xf32>, %[[M:.+]]: tensor<4x4xi1>)
// CHECK: %[[D:.+]] = ds.fused_matmul %[[G]], %[[V]] addend %[[Y]] mask %[[M]] {combine = #ds<combine softmax_grad>, transpose_rhs = true}
// CHECK: ds.softmax_grad
// CHECK: return %[[D]]
// NOROW-LABEL: func.func @scores_softmax_grad
// NOROW-COUNT-2: ds.softmax_grad
func.func @scores_softmax_grad(%g: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %y: tensor<2x4x4xf32>, %m: tensor<4x4xi1>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %dy = ds.matmul %g, %v {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %dx = ds.softmax_grad %y, %dy mask %m {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<4x4xi1>) -> tensor<2x4x4xf32>
  %p = ds.matmul %g, %v {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %dp = ds.softmax_grad %p, %y {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %dx, %dp : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// A training forward: the activation's input is also read by the backward
// (GELU's gradient). The activation is folded anyway and the product stores
// its input too (pre_activation), which the later reader takes. Not when a
// reader of the input comes before the activation.
// CHECK-LABEL: func.func @keep_pre_activation
// CHECK-SAME: (%[[X:.+]]: tensor<6x4xf32>, %[[W:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>, %[[G:.+]]: tensor<6x8xf32>)
// CHECK: %[[Y:.+]], %[[PRE:.+]] = ds.fused_matmul %[[X]], %[[W]] bias %[[B]] {activation = #ds<activation gelu>}
// CHECK-SAME: -> (tensor<6x8xf32>, tensor<6x8xf32>)
// CHECK: ds.gelu_grad %[[PRE]], %[[G]]
// CHECK: return %[[Y]]
func.func @keep_pre_activation(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>, %g: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>) {
  %p = ds.matmul %x, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %h = ds.add %p, %b : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %a = ds.gelu %h : tensor<6x8xf32>
  %d = ds.gelu_grad %h, %g : tensor<6x8xf32>
  return %a, %d : tensor<6x8xf32>, tensor<6x8xf32>
}

// -----

// CHECK-LABEL: func.func @pre_activation_read_first
// CHECK: ds.fused_matmul %{{.+}}, %{{.+}} bias %{{.+}} :
// CHECK: ds.gelu_grad
// CHECK: ds.gelu
func.func @pre_activation_read_first(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>, %g: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>) {
  %p = ds.matmul %x, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %h = ds.add %p, %b : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %d = ds.gelu_grad %h, %g : tensor<6x8xf32>
  %a = ds.gelu %h : tensor<6x8xf32>
  return %a, %d : tensor<6x8xf32>, tensor<6x8xf32>
}

// -----

// A quantized product (a QDQ model's) takes its bias and then the
// QuantizeLinear/DequantizeLinear of its result (ds.fake_quantize): the
// result is rounded to that uint8 grid as it is stored.
// CHECK-LABEL: func.func @quantized_round
// CHECK: %[[Y:.+]] = ds.quantized_matmul %arg0, %arg1, %arg2 bias %arg3 {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 5.000000e-01 : f64, input_zero_point = 3 : i64, round_scale = 2.500000e-01 : f64, round_zero_point = 7 : i64}
// CHECK-NOT: ds.fake_quantize
// CHECK: return %[[Y]]
func.func @quantized_round(%x: tensor<4x8xf32>, %w: tensor<6x8xi8>, %s: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<4x6xf32> {
  %p = ds.quantized_matmul %x, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.5 : f64, input_zero_point = 3 : i64} : (tensor<4x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<4x6xf32>
  %a = ds.add %p, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %y = ds.fake_quantize %a {scale = 0.25 : f64, zero_point = 7 : i64} : tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// A quantized product between reshapes to and from 2-D (onnxruntime's
// Gemm-based linear layers flatten the batch) takes the batched operand
// itself: a graph output then needs no copy out of a view.
// CHECK-LABEL: func.func @quantized_unflatten
// CHECK-NEXT: %[[Y:.+]] = ds.quantized_matmul %arg0, %arg1, %arg2 {{.+}} : (tensor<2x3x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<2x3x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @quantized_unflatten(%x: tensor<2x3x8xf32>, %w: tensor<6x8xi8>, %s: tensor<6xf32>) -> tensor<2x3x6xf32> {
  %f = ds.reshape %x : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %p = ds.quantized_matmul %f, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.5 : f64, input_zero_point = 3 : i64} : (tensor<6x8xf32>, tensor<6x8xi8>, tensor<6xf32>) -> tensor<6x6xf32>
  %y = ds.reshape %p : (tensor<6x6xf32>) -> tensor<2x3x6xf32>
  return %y : tensor<2x3x6xf32>
}
