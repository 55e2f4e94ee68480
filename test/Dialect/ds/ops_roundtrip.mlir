// Every ds op prints and parses back to itself, and round-trips through the
// generic form.
// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x3xi1>,
                       %i: tensor<4xi64>, %key: tensor<i64>) -> tensor<2x3xf32> {
  // CHECK: ds.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = ds.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.sub
  %1 = ds.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.mul
  %2 = ds.mul %1, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.div
  %3 = ds.div %2, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.pow
  %4 = ds.pow %3, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.min
  %5 = ds.min %4, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.max
  %6 = ds.max %5, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.equal {{.*}} -> tensor<2x3xi1>
  %e = ds.equal %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: ds.less
  %l = ds.less %6, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: ds.greater
  %g = ds.greater %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: ds.less_equal
  %le = ds.less_equal %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: ds.greater_equal
  %ge = ds.greater_equal %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: ds.and
  %and = ds.and %e, %l : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: ds.or
  %or = ds.or %and, %g : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: ds.xor
  %xor = ds.xor %or, %le : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: ds.not
  %not = ds.not %xor : tensor<2x3xi1>
  // CHECK: ds.where
  %w = ds.where %not, %6, %a : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: ds.sqrt
  %u0 = ds.sqrt %w : tensor<2x3xf32>
  // CHECK: ds.reciprocal
  %u1 = ds.reciprocal %u0 : tensor<2x3xf32>
  // CHECK: ds.exp
  %u2 = ds.exp %u1 : tensor<2x3xf32>
  // CHECK: ds.log
  %u3 = ds.log %u2 : tensor<2x3xf32>
  // CHECK: ds.erf
  %u4 = ds.erf %u3 : tensor<2x3xf32>
  // CHECK: ds.tanh
  %u5 = ds.tanh %u4 : tensor<2x3xf32>
  // CHECK: ds.sigmoid
  %u6 = ds.sigmoid %u5 : tensor<2x3xf32>
  // CHECK: ds.relu
  %u7 = ds.relu %u6 : tensor<2x3xf32>
  // CHECK: ds.neg
  %u8 = ds.neg %u7 : tensor<2x3xf32>
  // CHECK: ds.abs
  %u9 = ds.abs %u8 : tensor<2x3xf32>
  // CHECK: ds.gelu %{{.*}} : tensor<2x3xf32>
  %g0 = ds.gelu %u9 : tensor<2x3xf32>
  // CHECK: ds.gelu %{{.*}} {approximate = #ds<gelu_approximation tanh>} : tensor<2x3xf32>
  %g1 = ds.gelu %g0 {approximate = #ds<gelu_approximation tanh>} : tensor<2x3xf32>
  // CHECK: ds.cast %{{.*}} : tensor<4xi64> -> tensor<4xf32>
  %f = ds.cast %i : tensor<4xi64> -> tensor<4xf32>
  // CHECK: ds.sin
  %s0 = ds.sin %g1 : tensor<2x3xf32>
  // CHECK: ds.cos
  %s1 = ds.cos %s0 : tensor<2x3xf32>
  // CHECK: ds.floor
  %s2 = ds.floor %s1 : tensor<2x3xf32>
  // CHECK: ds.ceil
  %s3 = ds.ceil %s2 : tensor<2x3xf32>
  // CHECK: ds.round
  %s4 = ds.round %s3 : tensor<2x3xf32>
  // CHECK: ds.sign
  %s5 = ds.sign %s4 : tensor<2x3xf32>
  // CHECK: ds.softplus
  %s6 = ds.softplus %s5 : tensor<2x3xf32>
  // CHECK: ds.is_nan %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi1>
  %s7 = ds.is_nan %s6 : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: ds.is_inf
  %s8 = ds.is_inf %s6 : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: ds.mod
  %s9 = ds.mod %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  // CHECK: ds.tan
  %h0 = ds.tan %s6 : tensor<2x3xf32>
  // CHECK: ds.asin
  %h1 = ds.asin %h0 : tensor<2x3xf32>
  // CHECK: ds.acos
  %h2 = ds.acos %h1 : tensor<2x3xf32>
  // CHECK: ds.atan
  %h3 = ds.atan %h2 : tensor<2x3xf32>
  // CHECK: ds.sinh
  %h4 = ds.sinh %h3 : tensor<2x3xf32>
  // CHECK: ds.cosh
  %h5 = ds.cosh %h4 : tensor<2x3xf32>
  // CHECK: ds.asinh
  %h6 = ds.asinh %h5 : tensor<2x3xf32>
  // CHECK: ds.acosh
  %h7 = ds.acosh %h6 : tensor<2x3xf32>
  // CHECK: ds.atanh
  %h8 = ds.atanh %h7 : tensor<2x3xf32>
  // CHECK: ds.arg_max %{{.*}} {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xi64>
  %am = ds.arg_max %h8 {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xi64>
  // CHECK: ds.arg_min %{{.*}} {axis = 0 : i64, select_last_index = true} : (tensor<2x3xf32>) -> tensor<1x3xi64>
  %an = ds.arg_min %h8 {axis = 0 : i64, select_last_index = true} : (tensor<2x3xf32>) -> tensor<1x3xi64>
  // CHECK: ds.random_mask %{{.*}} {ratio = 1.000000e-01 : f64, stream = 3 : i64} : tensor<i64> -> tensor<2x3xf32>
  %rm = ds.random_mask %key {ratio = 0.1 : f64, stream = 3 : i64} : tensor<i64> -> tensor<2x3xf32>
  // CHECK: ds.random %{{.*}} {a = -1.000000e+00 : f64, b = 2.000000e+00 : f64, distribution = #ds<distribution uniform>, stream = 4 : i64} : tensor<i64> -> tensor<2x3xbf16>
  %ru = ds.random %key {distribution = #ds<distribution uniform>, a = -1.0 : f64, b = 2.0 : f64, stream = 4 : i64} : tensor<i64> -> tensor<2x3xbf16>
  // CHECK: ds.random %{{.*}} {a = 0.000000e+00 : f64, b = 1.000000e+00 : f64, distribution = #ds<distribution normal>, stream = 5 : i64} : tensor<i64> -> tensor<7xf64>
  %rn = ds.random %key {distribution = #ds<distribution normal>, a = 0.0 : f64, b = 1.0 : f64, stream = 5 : i64} : tensor<i64> -> tensor<7xf64>
  // CHECK: ds.resample %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 1>, taps = array<i64: 2>} : (tensor<2x3xf32>, tensor<12xi64>, tensor<12xf32>) -> tensor<2x6xf32>
  %rsi = ds.constant dense<[0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2]> : tensor<12xi64>
  %rsw = ds.constant dense<0.5> : tensor<12xf32>
  %rs = ds.resample %s6, %rsi, %rsw {axes = array<i64: 1>, taps = array<i64: 2>} : (tensor<2x3xf32>, tensor<12xi64>, tensor<12xf32>) -> tensor<2x6xf32>
  // CHECK: ds.trilu %{{.*}} {k = 1 : i64, upper = false} : tensor<2x3xf32>
  %t0 = ds.trilu %s6 {k = 1 : i64, upper = false} : tensor<2x3xf32>
  // CHECK: ds.cumsum %{{.*}} {axis = 1 : i64, reverse = true} : tensor<2x3xf32>
  %t1 = ds.cumsum %t0 {axis = 1 : i64, reverse = true} : tensor<2x3xf32>
  // CHECK: ds.cumprod %{{.*}} {axis = 0 : i64, exclusive = true} : tensor<2x3xf32>
  %t2 = ds.cumprod %t1 {axis = 0 : i64, exclusive = true} : tensor<2x3xf32>
  return %g1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @bitwise
func.func @bitwise(%a: tensor<4xi32>, %b: tensor<i32>, %u: tensor<4xui8>) -> tensor<4xf32> {
  // CHECK: ds.bitwise_and %{{.*}}, %{{.*}} : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  %0 = ds.bitwise_and %a, %b : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  // CHECK: ds.bitwise_or
  %1 = ds.bitwise_or %0, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  // CHECK: ds.bitwise_xor
  %2 = ds.bitwise_xor %1, %b : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  // CHECK: ds.shift_left
  %3 = ds.shift_left %2, %b : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  // CHECK: ds.shift_right
  %4 = ds.shift_right %3, %b : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  // CHECK: ds.bitwise_not %{{.*}} : tensor<4xui8>
  %5 = ds.bitwise_not %u : tensor<4xui8>
  // CHECK: ds.bitcast %{{.*}} : tensor<4xi32> -> tensor<4xf32>
  %6 = ds.bitcast %4 : tensor<4xi32> -> tensor<4xf32>
  return %6 : tensor<4xf32>
}

// CHECK-LABEL: func.func @linalg_and_reductions
func.func @linalg_and_reductions(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>,
                                 %g: tensor<32xf32>) -> tensor<2x8x32xf32> {
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %0 = ds.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %wt = ds.transpose %w {permutation = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %bias = ds.constant dense<1.0> : tensor<32xf32>
  // CHECK: ds.quantized_matmul %{{.*}}, %{{.*}}, %{{.*}} zero_point %{{.*}} bias %{{.*}} {activation = #ds<activation relu>, bits = 4 : i64, group_size = 8 : i64}
  %qw = ds.constant dense<7> : tensor<32x8xui8>
  %qs = ds.constant dense<0.5> : tensor<32x2xf32>
  %qz = ds.constant dense<8> : tensor<32x2xui8>
  %qb = ds.constant dense<0.0> : tensor<32xf32>
  %qm = ds.quantized_matmul %x, %qw, %qs zero_point %qz bias %qb {bits = 4 : i64, group_size = 8 : i64, activation = #ds<activation relu>} : (tensor<2x8x16xf32>, tensor<32x8xui8>, tensor<32x2xf32>, tensor<32x2xui8>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: ds.dynamic_quantize %{{.*}} : (tensor<2x8x16xf32>) -> (tensor<2x8x16xui8>, tensor<f32>, tensor<ui8>)
  %dq, %dqs, %dqz = ds.dynamic_quantize %x : (tensor<2x8x16xf32>) -> (tensor<2x8x16xui8>, tensor<f32>, tensor<ui8>)
  // CHECK: ds.cached_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {key_shape = array<i64: 2, 1, 8, 16>, {{.*}}result_bshd, scale = 2.500000e-01 : f64, {{.*}}window = 4 : i64}
  %kcache = ds.constant dense<0.0> : tensor<2x1x2x16x16xf32>
  %vcache = ds.constant dense<0.0> : tensor<2x1x32x16xf32>
  %rows = ds.constant dense<[0, 1]> : tensor<2xi64>
  %ca, %kc1, %vc1 = ds.cached_attention %x, %x, %x, %kcache, %vcache, %rows, %rows, %rows {query_shape = array<i64: 2, 1, 8, 16>, query_strides = array<i64: 128, 0, 16, 1>, key_shape = array<i64: 2, 1, 8, 16>, key_strides = array<i64: 128, 0, 16, 1>, value_shape = array<i64: 2, 1, 8, 16>, value_strides = array<i64: 128, 0, 16, 1>, scale = 0.25 : f64, window = 4 : i64, result_bshd} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x1x2x16x16xf32>, tensor<2x1x32x16xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> (tensor<2x8x1x16xf32>, tensor<2x1x2x16x16xf32>, tensor<2x1x32x16xf32>)
  // CHECK: ds.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {key_shape = array<i64: 2, 1, 8, 16>, {{.*}}mask_fill = -1.000000e+04 : f64, {{.*}}result_bshd, scale = 2.500000e-01 : f64{{.*}}zero_nan_rows}
  %mk = ds.constant dense<false> : tensor<8x8xi1>
  %att = ds.attention %x, %x, %x mask %mk {query_shape = array<i64: 2, 1, 8, 16>, query_strides = array<i64: 128, 0, 16, 1>, key_shape = array<i64: 2, 1, 8, 16>, key_strides = array<i64: 128, 0, 16, 1>, value_shape = array<i64: 2, 1, 8, 16>, value_strides = array<i64: 128, 0, 16, 1>, scale = 0.25 : f64, mask_fill = -1.0e4 : f64, result_bshd, zero_nan_rows} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<8x8xi1>) -> tensor<2x8x1x16xf32>
  // CHECK: ds.fused_matmul %{{.*}}, %{{.*}} bias %{{.*}} addend %{{.*}} {activation = #ds<activation gelu_tanh>, alpha = 2.500000e-01 : f64, combine = #ds<combine mul>, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %fm = ds.fused_matmul %x, %wt bias %bias addend %0 {activation = #ds<activation gelu_tanh>, alpha = 0.25 : f64, combine = #ds<combine mul>, transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: ds.reduce_sum %{{.*}} {axes = array<i64: 2>} : (tensor<2x8x32xf32>) -> tensor<2x8x1xf32>
  %1 = ds.reduce_sum %0 {axes = array<i64: 2>} : (tensor<2x8x32xf32>) -> tensor<2x8x1xf32>
  // CHECK: ds.reduce_mean %{{.*}} {axes = array<i64: 0, 2>, keepdims = false}
  %2 = ds.reduce_mean %0 {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x8x32xf32>) -> tensor<8xf32>
  // CHECK: ds.reduce_max
  %3 = ds.reduce_max %0 {axes = array<i64: 1>} : (tensor<2x8x32xf32>) -> tensor<2x1x32xf32>
  // CHECK: ds.reduce_min
  %4 = ds.reduce_min %0 {axes = array<i64: 1>} : (tensor<2x8x32xf32>) -> tensor<2x1x32xf32>
  // CHECK: ds.reduce_prod
  %5 = ds.reduce_prod %0 {axes = array<i64: 1>} : (tensor<2x8x32xf32>) -> tensor<2x1x32xf32>
  // CHECK: ds.softmax %{{.*}} {axis = 2 : i64} : tensor<2x8x32xf32>
  %6 = ds.softmax %0 {axis = 2 : i64} : tensor<2x8x32xf32>
  // CHECK: ds.log_softmax
  %7 = ds.log_softmax %6 {axis = 2 : i64} : tensor<2x8x32xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
  %8 = ds.layer_norm %7, %g, %g {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}} {axis = 2 : i64
  %9 = ds.layer_norm %8, %g {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %9 : tensor<2x8x32xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>) -> tensor<2x5x4xf32> {
  // CHECK: ds.reshape %{{.*}} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %0 = ds.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: ds.squeeze %{{.*}} {axes = array<i64: 0>} : (tensor<1x6x4xf32>) -> tensor<6x4xf32>
  %u = ds.unsqueeze %0 {axes = array<i64: 0>} : (tensor<6x4xf32>) -> tensor<1x6x4xf32>
  %s = ds.squeeze %u {axes = array<i64: 0>} : (tensor<1x6x4xf32>) -> tensor<6x4xf32>
  // CHECK: ds.transpose %{{.*}} {permutation = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %t = ds.transpose %s {permutation = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  // CHECK: ds.slice %{{.*}} {starts = array<i64: 3, 5>, steps = array<i64: -1, -2>} : (tensor<4x6xf32>) -> tensor<4x3xf32>
  %sl = ds.slice %t {starts = array<i64: 3, 5>, steps = array<i64: -1, -2>} : (tensor<4x6xf32>) -> tensor<4x3xf32>
  // CHECK: ds.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<4x9xf32>
  %c = ds.concat %sl, %t {axis = 1 : i64} : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<4x9xf32>
  // CHECK: ds.split %{{.*}} {axis = 1 : i64} : (tensor<4x9xf32>) -> (tensor<4x2xf32>, tensor<4x7xf32>)
  %p:2 = ds.split %c {axis = 1 : i64} : (tensor<4x9xf32>) -> (tensor<4x2xf32>, tensor<4x7xf32>)
  // CHECK: ds.gather %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  %g = ds.gather %x, %i {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  // CHECK: ds.expand %{{.*}} : (tensor<4x1xf32>) -> tensor<4x5xf32>
  %col = ds.slice %p#0 {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x2xf32>) -> tensor<4x1xf32>
  %e = ds.expand %col : (tensor<4x1xf32>) -> tensor<4x5xf32>
  return %g : tensor<2x5x4xf32>
}

// CHECK-LABEL: func.func @values
func.func @values() -> (tensor<2xf32>, tensor<3xi64>) {
  // CHECK: ds.constant dense<[1, 2, 3]> : tensor<3xi64>
  %c = ds.constant dense<[1, 2, 3]> : tensor<3xi64>
  // CHECK: ds.parameter "fc.bias" = dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
  %p = ds.parameter "fc.bias" = dense<[0.5, 0.25]> : tensor<2xf32>
  return %p, %c : tensor<2xf32>, tensor<3xi64>
}

// CHECK-LABEL: func.func @windows
func.func @windows(%x: tensor<2x4x6x6xf32>, %w: tensor<8x2x3x3xf32>, %b: tensor<8xf32>) -> tensor<2x8x3x3xf32> {
  // CHECK: ds.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
  %y = ds.conv %x, %w, %b {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<8x2x3x3xf32>, tensor<8xf32>) -> tensor<2x8x3x3xf32>
  // CHECK: ds.conv_grad
  %dx, %dw = ds.conv_grad %x, %w, %y {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<8x2x3x3xf32>, tensor<2x8x3x3xf32>) -> (tensor<2x4x6x6xf32>, tensor<8x2x3x3xf32>)
  // CHECK: ds.pool %{{.*}} {count_include_pad = true, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, kind = #ds<pool_kind avg>
  %p = ds.pool %y {kind = #ds<pool_kind avg>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = true} : (tensor<2x8x3x3xf32>) -> tensor<2x8x2x2xf32>
  // CHECK: ds.pool_grad
  %pg = ds.pool_grad %y, %p {kind = #ds<pool_kind avg>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = true} : (tensor<2x8x3x3xf32>, tensor<2x8x2x2xf32>) -> tensor<2x8x3x3xf32>
  return %y : tensor<2x8x3x3xf32>
}

// CHECK-LABEL: func.func @indexing_and_quantized
func.func @indexing_and_quantized(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>, %q: tensor<1x1x4x4xui8>, %a: tensor<2x3xi32>, %b: tensor<3x2xi32>) -> tensor<2x2xi32> {
  // CHECK: ds.top_k %{{.*}} {axis = 1 : i64, k = 2 : i64, largest = false} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  %v, %vi = ds.top_k %x {axis = 1 : i64, k = 2 : i64, largest = false} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  // CHECK: ds.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, reduction = #ds<scatter_reduction max>}
  %s = ds.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = #ds<scatter_reduction max>} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  // CHECK: ds.pool %{{.*}} {{.*}}kind = #ds<pool_kind max>{{.*}} : (tensor<1x1x4x4xui8>) -> tensor<1x1x2x2xui8>
  %p = ds.pool %q {kind = #ds<pool_kind max>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xui8>) -> tensor<1x1x2x2xui8>
  // CHECK: ds.max_pool_indices %{{.*}} {column_major = true
  %pi = ds.max_pool_indices %q {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, column_major = true} : (tensor<1x1x4x4xui8>) -> tensor<1x1x2x2xi64>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  %m = ds.matmul %a, %b : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  return %m : tensor<2x2xi32>
}

// CHECK-LABEL: func.func @fused_elementwise
// CHECK: ds.fused_elementwise %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xi1>) -> tensor<2x3xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<f32>, %[[M:.+]]: tensor<i1>):
// CHECK-NEXT: %[[T:.+]] = ds.tanh %[[A]] : tensor<f32>
// CHECK-NEXT: %[[W:.+]] = ds.where %[[M]], %[[T]], %[[A]] : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: ds.yield %[[W]] : tensor<f32>
func.func @fused_elementwise(%x: tensor<2x3xf32>, %m: tensor<3xi1>) -> tensor<2x3xf32> {
  %0 = ds.fused_elementwise %x, %m : (tensor<2x3xf32>, tensor<3xi1>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<f32>, %b: tensor<i1>):
    %t = ds.tanh %a : tensor<f32>
    %w = ds.where %b, %t, %a : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
    ds.yield %w : tensor<f32>
  }
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @recompute_barrier
func.func @recompute_barrier(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: ds.optimization_barrier %{{.*}} : tensor<2x8xf32>
  %0 = ds.optimization_barrier %x : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
