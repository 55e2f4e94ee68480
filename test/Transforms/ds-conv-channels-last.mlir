// ds-conv-channels-last: inference convolutions compute channels-last; the
// transposes around them sink through residual adds, per-channel scales,
// poolings, resamplings, concatenations and reductions and cancel between
// convolutions,
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

// ShuffleNet's unit: a slice (torch.chunk) into a convolution, a
// concatenation with the other half, the channel shuffle (reshape to
// [N, 2, C/2, H, W], swap, reshape back) and a split into two
// convolutions. Everything stays channels-last: the shuffle is one
// transpose of the last two dimensions of [N, H, W, 2, C/2].
// CHECK-LABEL: func.func @shuffle
// CHECK: %[[IN:.+]] = ds.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: %[[C1:.+]] = ds.conv %[[IN]], %{{.+}} {channels_last{{.*}}} : (tensor<1x4x4x4xf32>, tensor<8x4x1x1xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NEXT: %[[A:.+]] = ds.slice %[[C1]] {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[B:.+]] = ds.slice %[[C1]] {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[C2:.+]] = ds.conv %[[B]], %{{.+}} {channels_last{{.*}} -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[CAT:.+]] = ds.concat %[[A]], %[[C2]] {axis = 3 : i64} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NEXT: %[[R:.+]] = ds.reshape %[[CAT]] : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x2x4xf32>
// CHECK-NEXT: %[[SH:.+]] = ds.transpose %[[R]] {permutation = array<i64: 0, 1, 2, 4, 3>} : (tensor<1x4x4x2x4xf32>) -> tensor<1x4x4x4x2xf32>
// CHECK-NEXT: %[[M:.+]] = ds.reshape %[[SH]] : (tensor<1x4x4x4x2xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NEXT: %[[S:.+]]:2 = ds.split %[[M]] {axis = 3 : i64} : (tensor<1x4x4x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>)
// CHECK-NEXT: %[[C3:.+]] = ds.conv %[[S]]#0, %{{.+}} {channels_last
// CHECK-NEXT: %[[C4:.+]] = ds.conv %[[S]]#1, %{{.+}} {channels_last
// CHECK-NEXT: ds.add %[[C3]], %[[C4]] : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>)
// CHECK-NEXT: %[[OUT:.+]] = ds.transpose %{{.+}} {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: return %[[OUT]]
func.func @shuffle(%x: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %w1 = ds.parameter "w1" = dense<0.1> : tensor<8x4x1x1xf32>
  %w2 = ds.parameter "w2" = dense<0.2> : tensor<4x4x1x1xf32>
  %w3 = ds.parameter "w3" = dense<0.3> : tensor<4x4x1x1xf32>
  %c1 = ds.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x4x4xf32>
  %a = ds.slice %c1 {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x8x4x4xf32>) -> tensor<1x4x4x4xf32>
  %b = ds.slice %c1 {starts = array<i64: 0, 4, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x8x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c2 = ds.conv %b, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %cat = ds.concat %a, %c2 {axis = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x8x4x4xf32>
  %r = ds.reshape %cat : (tensor<1x8x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %t = ds.transpose %r {permutation = array<i64: 0, 2, 1, 3, 4>} : (tensor<1x2x4x4x4xf32>) -> tensor<1x4x2x4x4xf32>
  %m = ds.reshape %t : (tensor<1x4x2x4x4xf32>) -> tensor<1x8x4x4xf32>
  %s:2 = ds.split %m {axis = 1 : i64} : (tensor<1x8x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>)
  %c3 = ds.conv %s#0, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %c4 = ds.conv %s#1, %w3 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %o = ds.add %c3, %c4 : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %o : tensor<1x4x4x4xf32>
}

// A reshape that merges dimensions a transpose left out of order (here
// the spatial ones, swapped) stays after it when no convolution follows:
// moving it would take a second transpose to order them.
// CHECK-LABEL: func.func @reshape_kept
// CHECK: ds.conv %{{.+}} {channels_last
// CHECK-NEXT: %[[T:.+]] = ds.transpose %{{.+}} {permutation = array<i64: 0, 3, 2, 1>}
// CHECK-NEXT: ds.reshape %[[T]] : (tensor<1x2x3x4xf32>) -> tensor<1x2x12xf32>
// CHECK-NEXT: return
func.func @reshape_kept(%x: tensor<1x2x4x3xf32>) -> tensor<1x2x12xf32> {
  %w = ds.parameter "w" = dense<0.1> : tensor<2x2x1x1xf32>
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x3xf32>
  %t = ds.transpose %c {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x3xf32>) -> tensor<1x2x3x4xf32>
  %r = ds.reshape %t : (tensor<1x2x3x4xf32>) -> tensor<1x2x12xf32>
  return %r : tensor<1x2x12xf32>
}

// A convolution with its residual already folded in (an addend that is a
// function argument): the addend's transpose comes before the convolution
// that reads it.
// CHECK-LABEL: func.func @addend_argument
// CHECK: %[[X:.+]] = ds.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: %[[R:.+]] = ds.transpose %arg1 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: ds.conv %[[X]], %{{.+}} addend %[[R]] {channels_last
func.func @addend_argument(%x: tensor<1x2x2x2xf32>, %r: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = ds.constant dense<1.0> : tensor<2x2x1x1xf32>
  %c = ds.conv %x, %w addend %r {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %c : tensor<1x2x2x2xf32>
}

// A U-Net's 2x upsampling between convolutions resamples channels-last
// (axes H, W of [N, H, W, C]); an upsampling whose result no convolution
// reads keeps its transpose before it (the smaller tensor).
// CHECK-LABEL: func.func @upsample
// CHECK: %[[C1:.+]] = ds.conv {{.*}} -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[U:.+]] = ds.resample %[[C1]], %{{.+}}, %{{.+}} {axes = array<i64: 1, 2>, taps = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<16xi64>, tensor<16xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT: %[[C2:.+]] = ds.conv %[[U]]
// CHECK-NEXT: %[[T:.+]] = ds.transpose %[[C2]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: ds.resample %[[T]], %{{.+}}, %{{.+}} {axes = array<i64: 2, 3>, taps = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<1x4x16x16xf32>
func.func @upsample(%x: tensor<1x3x4x4xf32>) -> tensor<1x4x16x16xf32> {
  %w1 = ds.parameter "w1" = dense<0.1> : tensor<4x3x1x1xf32>
  %w2 = ds.parameter "w2" = dense<0.2> : tensor<4x4x1x1xf32>
  %i8 = ds.constant dense<[0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3]> : tensor<16xi64>
  %w8 = ds.constant dense<1.0> : tensor<16xf32>
  %i16 = ds.constant dense<[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]> : tensor<32xi64>
  %w16 = ds.constant dense<1.0> : tensor<32xf32>
  %c1 = ds.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<1x4x4x4xf32>
  %u = ds.resample %c1, %i8, %w8 {axes = array<i64: 2, 3>, taps = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<16xi64>, tensor<16xf32>) -> tensor<1x4x8x8xf32>
  %c2 = ds.conv %u, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %y = ds.resample %c2, %i16, %w16 {axes = array<i64: 2, 3>, taps = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}
