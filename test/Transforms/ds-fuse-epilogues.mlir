// ds-fuse-epilogues: a residual add, then a relu or a max/min with a
// constant scalar bound, that is the only user of a conv becomes the conv's
// addend, then its clip_min/clip_max.
// RUN: ds-opt %s --ds-fuse-epilogues | FileCheck %s

// CHECK-LABEL: func.func @relu
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {clip_min = 0.000000e+00 : f64
// CHECK-NOT: ds.relu
// CHECK: return %[[C]]
func.func @relu(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r = ds.relu %c : tensor<1x3x4x4xf32>
  return %r : tensor<1x3x4x4xf32>
}

// ReLU6 as PyTorch exports it (Clip: max then min), the bound on either side.
// CHECK-LABEL: func.func @relu6
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {clip_max = 6.000000e+00 : f64, clip_min = 0.000000e+00 : f64
// CHECK-NOT: ds.max
// CHECK-NOT: ds.min
// CHECK: return %[[C]]
func.func @relu6(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %lo = ds.constant dense<0.0> : tensor<f32>
  %hi = ds.constant dense<6.0> : tensor<f32>
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.max %c, %lo : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %b = ds.min %hi, %a : (tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %b : tensor<1x3x4x4xf32>
}

// Not fused: a second user (as in training, where the backward reads the
// conv's result), a bound that is not a constant, a bound that broadcasts
// the result larger, a min below a later max (not one clamp), and a min
// alone (a fused clamp turns NaN into its lower bound: -inf here).
// CHECK-LABEL: func.func @kept
// CHECK: %[[C1:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: ds.relu %[[C1]]
// CHECK: %[[C2:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: ds.max %[[C2]], %arg2
// CHECK: %[[C3:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: ds.max %[[C3]], %{{.+}} : (tensor<1x3x4x4xf32>, tensor<2x3x4x4xf32>)
// CHECK: %[[C4:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: %[[M4:.+]] = ds.min %[[C4]]
// CHECK: ds.max %[[M4]], %{{.+}} : (tensor<1x3x4x4xf32>, tensor<f32>)
// CHECK: %[[C5:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: ds.min %[[C5]]
func.func @kept(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %t: tensor<f32>)
    -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %one = ds.constant dense<1.0> : tensor<f32>
  %two = ds.constant dense<2.0> : tensor<f32>
  %wide = ds.constant dense<0.0> : tensor<2x3x4x4xf32>
  %c1 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r1 = ds.relu %c1 : tensor<1x3x4x4xf32>
  %c2 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r2 = ds.max %c2, %t : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c3 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r3 = ds.max %c3, %wide : (tensor<1x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %c4 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %m4 = ds.min %c4, %one : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %r4 = ds.max %m4, %two : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %c5 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %r5 = ds.min %c5, %one : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  return %c1, %r1, %r2, %r3, %r4, %r5 : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// A clamp written min first, then max (lower bound below the upper).
// CHECK-LABEL: func.func @min_then_max
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {clip_max = 2.000000e+00 : f64, clip_min = -1.000000e+00 : f64
// CHECK-NOT: ds.max
// CHECK-NOT: ds.min
// CHECK: return %[[C]]
func.func @min_then_max(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %lo = ds.constant dense<-1.0> : tensor<f32>
  %hi = ds.constant dense<2.0> : tensor<f32>
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.min %c, %hi : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %b = ds.max %a, %lo : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  return %b : tensor<1x3x4x4xf32>
}

// PyTorch 2's exporter writes Clip's bounds as one-element initializers.
// CHECK-LABEL: func.func @parameter_bounds
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {clip_max = 6.000000e+00 : f64, clip_min = 0.000000e+00 : f64
// CHECK: return %[[C]]
func.func @parameter_bounds(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %lo = ds.parameter "lo" = dense<0.0> : tensor<f32>
  %hi = ds.parameter "hi" = dense<6.0> : tensor<f32>
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.max %c, %lo : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %b = ds.min %a, %hi : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  return %b : tensor<1x3x4x4xf32>
}

// ResNet's block: relu(conv(x) + identity); the identity (here a later
// downsample convolution) moves before the convolution that now reads it.
// CHECK-LABEL: func.func @residual
// CHECK: %[[D:.+]] = ds.conv %arg0, %arg2 {dilations
// CHECK-NEXT: %[[Y:.+]] = ds.conv %arg0, %arg1 addend %[[D]] {clip_min = 0.000000e+00 : f64
// CHECK-NOT: ds.add
// CHECK-NOT: ds.relu
// CHECK: return %[[Y]]
func.func @residual(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %wd: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %d = ds.conv %x, %wd {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %s = ds.add %c, %d : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %r = ds.relu %s : tensor<1x3x4x4xf32>
  return %r : tensor<1x3x4x4xf32>
}

// An activation first and the add after: clamp(conv) + x is not
// clamp(conv + x), so the add stays outside.
// CHECK-LABEL: func.func @relu_then_add
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {clip_min = 0.000000e+00 : f64
// CHECK-NEXT: ds.add %[[C]], %arg2
func.func @relu_then_add(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %c = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.relu %c : tensor<1x3x4x4xf32>
  %s = ds.add %a, %r : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %s : tensor<1x3x4x4xf32>
}

// Training's pre-norm residual stream: the add of a layer norm's input
// gradient to the stream's becomes the norm gradient's addend, in place
// (the addend defined before it) or at the add (the addend later, and
// d_scale / d_bias read only after the add).
// CHECK-LABEL: func.func @norm_residual
// CHECK: %[[G:[a-z_0-9]+]], %[[GS:[a-z_0-9]+]], %{{.+}} = ds.layer_norm_grad %arg0, %arg1, %arg2 addend %arg3 {axis = 1 : i64
// CHECK: %[[L:.+]] = ds.matmul %arg0, %arg4
// CHECK-NEXT: %[[H:[a-z_0-9]+]], %{{.+}}, %[[HB:[a-z_0-9]+]] = ds.layer_norm_grad %arg0, %arg1, %arg2 addend %[[L]] {axis = 1 : i64
// CHECK-NOT: ds.add
// CHECK: return %[[G]], %[[GS]], %[[H]], %[[HB]]
func.func @norm_residual(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %r: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %a:3 = ds.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %s = ds.add %r, %a#0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b:3 = ds.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %l = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = ds.add %b#0, %l : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %a#1, %t, %b#2 : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// Not fused: the input gradient read twice, an addend of another shape
// (broadcast), and d_scale read between the norm gradient and a later
// addend.
// CHECK-LABEL: func.func @norm_kept
// CHECK-NOT: addend
// CHECK-COUNT-4: ds.add
// CHECK-NOT: addend
func.func @norm_kept(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>, %r: tensor<1x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %a:3 = ds.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %s = ds.add %dy, %a#0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b:3 = ds.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %t = ds.add %b#0, %r : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %c:3 = ds.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %e = ds.exp %c#1 : tensor<8xf32>
  %l = ds.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %u = ds.add %c#0, %l : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = ds.add %u, %l : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %a#0, %t, %e2, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// HardSwish as the importer writes it, x * where(t <= 0, 0, where(t >= 1,
// 1, t)) with t = x / 6 + 1/2, after a convolution (with its residual add)
// becomes the convolution's activation. A HardSigmoid with other
// constants, or an intermediate read elsewhere, is not one.
// CHECK-LABEL: func.func @hard_swish
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 addend %arg2 {activation = #ds<activation hard_swish>
// CHECK-NOT: ds.where
// CHECK: %[[K:.+]] = ds.conv %arg0, %arg1 {dilations
// CHECK: ds.where
// CHECK: return %[[C]], %{{.+}}, %{{.+}}
func.func @hard_swish(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %r: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) {
  %sixth = ds.constant dense<0.166666672> : tensor<f32>
  %half = ds.constant dense<0.5> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %c0 = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %c = ds.add %c0, %r : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.mul %c, %sixth : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %t = ds.add %a, %half : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %lo = ds.less_equal %t, %zero : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xi1>
  %hi = ds.greater_equal %t, %one : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xi1>
  %u = ds.where %hi, %one, %t : (tensor<1x3x4x4xi1>, tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %g = ds.where %lo, %zero, %u : (tensor<1x3x4x4xi1>, tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = ds.mul %g, %c : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  // Scale 0.2 (ONNX HardSigmoid's default): not HardSwish.
  %fifth = ds.constant dense<0.2> : tensor<f32>
  %k = ds.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %ka = ds.mul %k, %fifth : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %kt = ds.add %ka, %half : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xf32>
  %klo = ds.less_equal %kt, %zero : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xi1>
  %khi = ds.greater_equal %kt, %one : (tensor<1x3x4x4xf32>, tensor<f32>) -> tensor<1x3x4x4xi1>
  %ku = ds.where %khi, %one, %kt : (tensor<1x3x4x4xi1>, tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %kg = ds.where %klo, %zero, %ku : (tensor<1x3x4x4xi1>, tensor<f32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %ky = ds.mul %k, %kg : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %y, %ky, %kt : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
}

// A residual add after a HardSwish convolution stays an add: the addend
// goes in before the activation, not after it.
// CHECK-LABEL: func.func @add_after_hard_swish
// CHECK: %[[C:.+]] = ds.conv %arg0, %arg1 {activation = #ds<activation hard_swish>
// CHECK-NEXT: %[[A:.+]] = ds.add %[[C]], %arg2
// CHECK-NEXT: return %[[A]]
func.func @add_after_hard_swish(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %r: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %c = ds.conv %x, %w {activation = #ds<activation hard_swish>, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %a = ds.add %c, %r : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %a : tensor<1x3x4x4xf32>
}
