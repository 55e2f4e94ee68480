// ds-conv-channels-last: inference convolutions compute channels-last; the
// transposes around them sink through residual adds, per-channel scales,
// poolings, concatenations and reductions and cancel between convolutions,
// leaving one at the entry and one at the exit.
// RUN: ds-opt %s --ds-conv-channels-last | FileCheck %s

// A ResNet-style stem and block: conv, max pool, conv, residual add.
// CHECK-LABEL: func.func @block
// CHECK: %[[IN:.+]] = ds.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x8x8x3xf32>
// CHECK-NEXT: %[[C1:.+]] = ds.conv %[[IN]], %{{.+}} {channels_last, clip_min = 0.000000e+00 : f64{{.*}}} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT: %[[P:.+]] = ds.pool %[[C1]] {channels_last{{.*}}} : (tensor<1x8x8x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[C2:.+]] = ds.conv %[[P]], %{{.+}}, %{{.+}} {channels_last{{.*}}} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[A:.+]] = ds.add %[[C2]], %[[P]] : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[R:.+]] = ds.relu %[[A]] : tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[OUT:.+]] = ds.transpose %[[R]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @block(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %w1 = ds.parameter "w1" = dense<0.1> : tensor<4x3x3x3xf32>
  %w2 = ds.parameter "w2" = dense<0.2> : tensor<4x4x1x1xf32>
  %b2 = ds.parameter "b2" = dense<0.3> : tensor<4xf32>
  %c1 = ds.conv %x, %w1 {clip_min = 0.0 : f64, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %p = ds.pool %c1 {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, kind = #ds<pool_kind max>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  %c2 = ds.conv %p, %w2, %b2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  %a = ds.add %c2, %p : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %r = ds.relu %a : tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}

// A scalar operand does not stop a transpose; a broadcast operand that is
// not per-channel ([1, C, H, 1]: no reshape reads it channels-last) does
// (the transpose stays before the op); a convolution whose weight is not
// known before the run (a training forward's loaded state) stays
// channels-first.
// CHECK-LABEL: func.func @stops
// CHECK: ds.conv %{{.+}} {channels_last
// CHECK: %[[S:.+]] = ds.mul %{{.+}}, %arg2 : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
// CHECK-NEXT: %[[T:.+]] = ds.transpose %[[S]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: ds.add %[[T]], %arg3 : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xf32>)
// CHECK: ds.conv %arg0, %arg1 {dilations
// CHECK-NOT: channels_last
// CHECK: return
func.func @stops(%x: tensor<1x2x2x2xf32>, %w: tensor<2x2x1x1xf32>, %s: tensor<f32>, %bias: tensor<1x2x2x1xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %wc = ds.constant dense<0.5> : tensor<2x2x1x1xf32>
  %c = ds.conv %x, %wc {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %m = ds.mul %c, %s : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %a = ds.add %m, %bias : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xf32>) -> tensor<1x2x2x2xf32>
  %t = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  return %a, %t : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// DenseNet's step (concat, then a batch norm's per-channel affine and ReLU
// before the next convolution) and EfficientNet's squeeze-excitation (a
// global mean, a 1x1 convolution on [N, C, 1, 1], a per-channel gate): no
// transpose is left between the convolutions; per-channel operands are
// reshaped, the mean reduces the rows, and the transposes that move only
// unit dimensions become reshapes.
// CHECK-LABEL: func.func @dense_and_gate
// CHECK: ds.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: %[[C1:.+]] = ds.conv {{.+}} -> tensor<1x4x4x2xf32>
// CHECK-NEXT: %[[C2:.+]] = ds.conv %[[C1]], {{.+}} -> tensor<1x4x4x2xf32>
// CHECK-NEXT: %[[CAT:.+]] = ds.concat %[[C1]], %[[C2]] {axis = 3 : i64} : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[SC:.+]] = ds.reshape %{{.+}} : (tensor<4x1x1xf32>) -> tensor<1x1x1x4xf32>
// CHECK-NEXT: %[[BN:.+]] = ds.mul %[[CAT]], %[[SC]] : (tensor<1x4x4x4xf32>, tensor<1x1x1x4xf32>)
// CHECK-NEXT: %[[R:.+]] = ds.relu %[[BN]]
// CHECK-NEXT: %[[MEAN:.+]] = ds.reduce_mean %[[R]] {axes = array<i64: 1, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x1x1x4xf32>
// CHECK-NEXT: %[[SE:.+]] = ds.conv %[[MEAN]], {{.+}} {channels_last{{.*}}} : (tensor<1x1x1x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x1x1x4xf32>
// CHECK-NEXT: %[[G:.+]] = ds.sigmoid %[[SE]]
// CHECK-NEXT: %[[GATED:.+]] = ds.mul %[[G]], %[[R]] : (tensor<1x1x1x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[C3:.+]] = ds.conv %[[GATED]], {{.+}} -> tensor<1x4x4x2xf32>
// CHECK-NEXT: ds.transpose %[[C3]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: ds.transpose
// CHECK: return
func.func @dense_and_gate(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w1 = ds.parameter "w1" = dense<0.1> : tensor<2x2x1x1xf32>
  %w2 = ds.parameter "w2" = dense<0.2> : tensor<2x2x3x3xf32>
  %scale = ds.parameter "bn.scale" = dense<0.5> : tensor<4x1x1xf32>
  %wse = ds.parameter "se.fc" = dense<0.3> : tensor<4x4x1x1xf32>
  %w3 = ds.parameter "w3" = dense<0.4> : tensor<2x4x1x1xf32>
  %c1 = ds.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %c2 = ds.conv %c1, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x4x4xf32>
  %cat = ds.concat %c1, %c2 {axis = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32>
  %bn = ds.mul %cat, %scale : (tensor<1x4x4x4xf32>, tensor<4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %r = ds.relu %bn : tensor<1x4x4x4xf32>
  %mean = ds.reduce_mean %r {axes = array<i64: 2, 3>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x1x1xf32>
  %se = ds.conv %mean, %wse {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x1x1xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  %g = ds.sigmoid %se : tensor<1x4x1x1xf32>
  %gated = ds.mul %g, %r : (tensor<1x4x1x1xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c3 = ds.conv %gated, %w3 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<2x4x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %c3 : tensor<1x2x4x4xf32>
}
