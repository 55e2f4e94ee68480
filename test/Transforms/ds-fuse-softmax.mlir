// ds-fuse-softmax: a masked_fill (where with a scalar fill, either branch
// order) or an additive mask before a softmax over the last axis becomes
// ds.masked_softmax; where(mask, 0, softmax_grad) becomes the
// softmax_grad's mask. Kept: another axis, a masked value read elsewhere,
// a fill that is not a known scalar.
// RUN: ds-opt %s --ds-fuse-softmax -split-input-file | FileCheck %s

// A causal masked_fill, and its gradient.
// CHECK-LABEL: func.func @causal
// CHECK-NOT: ds.where
// CHECK: %[[P:.+]] = ds.masked_softmax %arg0, %arg1 {axis = 3 : i64, mask_fill = 0xFFF0000000000000 : f64} : (tensor<2x2x4x4xf32>, tensor<1x1x4x4xi1>) -> tensor<2x2x4x4xf32>
// CHECK: %[[G:.+]] = ds.softmax_grad %[[P]], %arg2 mask %arg1 {axis = 3 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x1x4x4xi1>) -> tensor<2x2x4x4xf32>
// CHECK-NOT: ds.where
// CHECK: return %[[P]], %[[G]]
func.func @causal(%s: tensor<2x2x4x4xf32>, %m: tensor<1x1x4x4xi1>, %dy: tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %w = ds.where %m, %ninf, %s : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ds.softmax %w {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %g = ds.softmax_grad %p, %dy {axis = 3 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %d = ds.where %m, %zero, %g : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %p, %d : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
}

// -----

// where(keep, scores, fill) (Hugging Face's polarity): the mask negated.
// CHECK-LABEL: func.func @keep
// CHECK: %[[N:.+]] = ds.not %arg1 : tensor<4x4xi1>
// CHECK: ds.masked_softmax %arg0, %[[N]] {axis = 1 : i64, mask_fill = -3.4028234663852886E+38 : f64}
// CHECK: %[[N2:.+]] = ds.not %arg1 : tensor<4x4xi1>
// CHECK: ds.softmax_grad %{{.+}}, %arg2 mask %[[N2]]
// CHECK-NOT: ds.where
func.func @keep(%s: tensor<4x4xf32>, %k: tensor<4x4xi1>, %dy: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %min = ds.constant dense<-3.40282347E+38> : tensor<1xf32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %w = ds.where %k, %s, %min : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<1xf32>) -> tensor<4x4xf32>
  %p = ds.softmax %w {axis = 1 : i64} : tensor<4x4xf32>
  %g = ds.softmax_grad %p, %dy {axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = ds.where %k, %g, %zero : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %p, %d : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// An additive mask (BERT's padding mask, broadcast over heads and rows).
// CHECK-LABEL: func.func @additive
// CHECK: %[[P:.+]] = ds.masked_softmax %arg0, %arg1 {axis = 3 : i64} : (tensor<2x2x3x5xf32>, tensor<2x1x1x5xf32>) -> tensor<2x2x3x5xf32>
// CHECK-NEXT: return %[[P]]
func.func @additive(%s: tensor<2x2x3x5xf32>, %m: tensor<2x1x1x5xf32>) -> tensor<2x2x3x5xf32> {
  %a = ds.add %m, %s : (tensor<2x1x1x5xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x3x5xf32>
  %p = ds.softmax %a {axis = 3 : i64} : tensor<2x2x3x5xf32>
  return %p : tensor<2x2x3x5xf32>
}

// -----

// Kept: a softmax over another axis, a masked value also returned, a
// fill that is not a known scalar, and a gradient read twice.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: ds.masked_softmax
// CHECK-NOT: mask
// CHECK: return
func.func @kept(%s: tensor<4x4xf32>, %m: tensor<4x4xi1>, %f: tensor<f32>, %dy: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %w0 = ds.where %m, %ninf, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p0 = ds.softmax %w0 {axis = 0 : i64} : tensor<4x4xf32>
  %w1 = ds.where %m, %ninf, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p1 = ds.softmax %w1 {axis = 1 : i64} : tensor<4x4xf32>
  %w2 = ds.where %m, %f, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p2 = ds.softmax %w2 {axis = 1 : i64} : tensor<4x4xf32>
  %g = ds.softmax_grad %p1, %dy {axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = ds.where %m, %zero, %g : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = ds.add %d, %g : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %p0, %w1, %p1, %p2, %e : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Three layers: every forward and backward mask fused (the forward fusions
// erase the wheres they take before the backward ones are looked for).
// CHECK-LABEL: func.func @layers
// CHECK-COUNT-3: ds.masked_softmax
// CHECK-COUNT-3: ds.softmax_grad %{{.+}}, %{{.+}} mask
// CHECK-NOT: ds.where
func.func @layers(%s: tensor<2x4x4xf32>, %m: tensor<4x4xi1>, %dy: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %w1 = ds.where %m, %ninf, %s : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p1 = ds.softmax %w1 {axis = 2 : i64} : tensor<2x4x4xf32>
  %w2 = ds.where %m, %ninf, %p1 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p2 = ds.softmax %w2 {axis = 2 : i64} : tensor<2x4x4xf32>
  %w3 = ds.where %m, %ninf, %p2 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p3 = ds.softmax %w3 {axis = 2 : i64} : tensor<2x4x4xf32>
  %g3 = ds.softmax_grad %p3, %dy {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %d3 = ds.where %m, %zero, %g3 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %g2 = ds.softmax_grad %p2, %d3 {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %d2 = ds.where %m, %zero, %g2 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %g1 = ds.softmax_grad %p1, %d2 {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %d1 = ds.where %m, %zero, %g1 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %p3, %d1 : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// A training step's cross-entropy loss and its gradient become one op with
// both results (one pass over the logits), at the loss when dloss is
// defined before it, else at the gradient; other labels stay apart.
// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[G:[a-z_0-9]+]], %[[L:[a-z_0-9]+]] = ds.softmax_cross_entropy_grad %arg0, %arg1, %arg2 {ds.loss, ignore_index = -1 : i64} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<f32>)
// CHECK: %[[S:.+]] = ds.mul %[[L]], %[[L]]
// CHECK: %[[C:.+]] = ds.mul %arg2, %arg2
// CHECK: %[[H:[a-z_0-9]+]], %[[M:[a-z_0-9]+]] = ds.softmax_cross_entropy_grad %arg0, %arg1, %[[C]] : {{.+}} -> (tensor<4x8xf32>, tensor<f32>)
// CHECK: ds.softmax_cross_entropy %arg0, %arg3
// CHECK: ds.softmax_cross_entropy_grad %arg0, %arg1, %arg2 {ignore_index = 5
// CHECK: return %[[S]], %[[G]], %[[M]], %[[H]]
func.func @cross_entropy(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %d: tensor<f32>, %l2: tensor<4xi64>) -> (tensor<f32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>) {
  %loss = ds.softmax_cross_entropy %x, %l {ds.loss, ignore_index = -1 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %sq = ds.mul %loss, %loss : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = ds.softmax_cross_entropy_grad %x, %l, %d {ignore_index = -1 : i64} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %loss2 = ds.softmax_cross_entropy %x, %l : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %c = ds.mul %d, %d : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g2 = ds.softmax_cross_entropy_grad %x, %l, %c : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %loss3 = ds.softmax_cross_entropy %x, %l2 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %g3 = ds.softmax_cross_entropy_grad %x, %l, %d {ignore_index = 5 : i64} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return %sq, %g, %loss2, %g2, %loss3, %g3 : tensor<f32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>
}
