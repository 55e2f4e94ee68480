// ds-insert-collectives: where an op needs another sharding than its
// operand has, the collective that moves it appears right before the op:
// all_reduce completes a partial sum, reduce_scatter when it is needed
// split on the same axis, all_gather undoes a split (with its outer
// factor), shard_slice splits a replicated value; ds.shard constraints
// become the same moves and function results leave replicated.
// RUN: ds-opt %s --ds-propagate-sharding --ds-insert-collectives | FileCheck %s

module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  // CHECK-LABEL: func.func @mlp
  func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>, %b2: tensor<8xf32>) -> tensor<4x8xf32> {
    // CHECK: %[[W1:.+]] = ds.shard_slice %arg1 {axes = ["tp"], dim = 1 : i64
    %s = ds.shard %w1 {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<8x16xf32>
    // CHECK: %[[H:.+]] = ds.matmul %arg0, %[[W1]]
    %h = ds.matmul %x, %s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    // CHECK: %[[B1:.+]] = ds.shard_slice %arg2 {axes = ["tp"], dim = 0 : i64
    // CHECK: ds.add %[[H]], %[[B1]]
    %hb = ds.add %h, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %a = ds.relu %hb : tensor<4x16xf32>
    // CHECK: %[[W2:.+]] = ds.shard_slice %arg3 {axes = ["tp"], dim = 0 : i64
    // CHECK: %[[P:.+]] = ds.matmul %{{.+}}, %[[W2]] {ds.sharding = #ds.sharding<{{\[\[}}], []], partial = ["tp"]>}
    %y = ds.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    // CHECK: %[[R:.+]] = ds.all_reduce %[[P]] {axes = ["tp"], ds.sharding = #ds.sharding<{{\[\[}}], []]>}
    // CHECK: ds.add %[[R]], %arg4
    %yb = ds.add %y, %b2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return %yb : tensor<4x8xf32>
  }

  // CHECK-LABEL: func.func @moves
  func.func @moves(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %a = ds.shard %x {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<4x8xf32>
    %b = ds.shard %w {sharding = #ds.sharding<[["tp"], []]>} : tensor<8x8xf32>
    // CHECK: %[[P:.+]] = ds.matmul
    %p = ds.matmul %a, %b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    // A partial sum needed split on the same axis: reduce_scatter.
    // CHECK: ds.reduce_scatter %[[P]] {axes = ["tp"], dim = 0 : i64
    %r = ds.shard %p {sharding = #ds.sharding<[["tp"], []]>} : tensor<4x8xf32>
    // A split dimension needed whole (softmax over it): all_gather.
    // CHECK: %[[G:.+]] = ds.all_gather %{{.+}} {axes = ["tp"], dim = 1 : i64
    // CHECK: ds.softmax %[[G]]
    %sm = ds.softmax %a {axis = 1 : i64} : tensor<4x8xf32>
    // Results leave whole.
    // CHECK: %[[OUT:.+]] = ds.all_gather %{{.+}} {axes = ["tp"], dim = 0 : i64
    // CHECK: return %[[OUT]], %{{.+}}
    return %r, %sm : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
