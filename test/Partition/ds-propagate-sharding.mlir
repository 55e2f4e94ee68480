// ds-propagate-sharding: splits flow from ds.shard constraints through
// elementwise ops, transposes, reshapes (a merged batch*heads dimension gets
// an outer factor) and matmuls (a split contraction gives a partial sum);
// ops without a rule stay replicated.
// RUN: ds-opt %s --ds-propagate-sharding | FileCheck %s

module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  // CHECK-LABEL: func.func @mlp
  func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
    %s = ds.shard %w1 {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<8x16xf32>
    // CHECK: ds.matmul {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"]]>
    %h = ds.matmul %x, %s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    // CHECK: ds.add {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"]]>
    %hb = ds.add %h, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    // CHECK: ds.relu {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"]]>
    %a = ds.relu %hb : tensor<4x16xf32>
    // CHECK: ds.matmul {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], []], partial = ["tp"]>
    %y = ds.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    // CHECK: ds.layer_norm {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], []]>
    %ln = ds.layer_norm %y, %g, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    // Dead values go first (autodiff leaves gradients of constants): a
    // collective inserted for one would never be removed.
    // CHECK-NOT: ds.exp
    %dead = ds.exp %a : tensor<4x16xf32>
    return %ln : tensor<4x8xf32>
  }

  // torch MultiheadAttention merges batch and heads: [10, 2, 8] -> [10, 8, 2]
  // keeps the heads split as the minor factor of the merged dimension.
  // CHECK-LABEL: func.func @merged_heads
  func.func @merged_heads(%x: tensor<10x2x8xf32>) -> tensor<20x8xf32> {
    %s = ds.shard %x {sharding = #ds.sharding<[[], [], ["tp"]]>} : tensor<10x2x8xf32>
    // CHECK: ds.reshape {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"], []], outer = [1, 2, 1]>
    %r = ds.reshape %s : (tensor<10x2x8xf32>) -> tensor<10x8x2xf32>
    // CHECK: ds.transpose {{.*}}ds.sharding = #ds.sharding<{{\[\[}}"tp"], [], []], outer = [2, 1, 1]>
    %t = ds.transpose %r {permutation = array<i64: 1, 0, 2>} : (tensor<10x8x2xf32>) -> tensor<8x10x2xf32>
    // CHECK: ds.softmax {{.*}}ds.sharding = #ds.sharding<{{\[\[}}"tp"], [], []], outer = [2, 1, 1]>
    %p = ds.softmax %t {axis = 2 : i64} : tensor<8x10x2xf32>
    %b = ds.transpose %p {permutation = array<i64: 1, 0, 2>} : (tensor<8x10x2xf32>) -> tensor<10x8x2xf32>
    // Back to [tokens, features]: a plain split of the features.
    // CHECK: ds.reshape {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"]]>
    %m = ds.reshape %b : (tensor<10x8x2xf32>) -> tensor<20x8xf32>
    return %m : tensor<20x8xf32>
  }

  // Rotary embeddings and grouped-query attention on heads split over tp:
  // halves of the head dimension sliced, negated and joined back (concat
  // along an unsplit axis), key/value heads repeated (expand keeps the split
  // of the dimension it does not widen), and the slice's adjoint in the
  // backward (insert_slice widens only the head dimension).
  // CHECK-LABEL: func.func @rotary_gqa
  func.func @rotary_gqa(%x: tensor<2x4x8xf32>, %kv: tensor<2x4x1x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x8xf32>) {
    %s = ds.shard %x {sharding = #ds.sharding<[[], ["tp"], []]>} : tensor<2x4x8xf32>
    %lo = ds.slice %s {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
    %hi = ds.slice %s {starts = array<i64: 0, 0, 4>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
    %n = ds.neg %hi : tensor<2x4x4xf32>
    // CHECK: ds.concat {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"], []]>
    %r = ds.concat %n, %lo {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
    %k = ds.shard %kv {sharding = #ds.sharding<[[], ["tp"], [], []]>} : tensor<2x4x1x8xf32>
    // CHECK: ds.expand {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"], [], []]>
    %e = ds.expand %k : (tensor<2x4x1x8xf32>) -> tensor<2x4x3x8xf32>
    // CHECK: ds.insert_slice {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], ["tp"], []]>
    %g = ds.insert_slice %lo {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
    return %r, %e, %g : tensor<2x4x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x8xf32>
  }
}
