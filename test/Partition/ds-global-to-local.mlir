// ds-global-to-local: every type becomes one rank's slice, the function is
// marked ds.spmd and the collectives now show what they move. A split that
// does not divide is an error naming the op
// (ds-global-to-local-errors.mlir).
// RUN: ds-opt %s --ds-propagate-sharding --ds-insert-collectives --ds-global-to-local | FileCheck %s

module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  // CHECK-LABEL: func.func @mlp
  // CHECK-SAME: (%arg0: tensor<4x8xf32>, %arg1: tensor<8x16xf32>, %arg2: tensor<16x8xf32>) -> tensor<4x8xf32> attributes {ds.spmd}
  func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> tensor<4x8xf32> {
    // CHECK: ds.shard_slice %arg1 {{.*}} : (tensor<8x16xf32>) -> tensor<8x8xf32>
    %s = ds.shard %w1 {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<8x16xf32>
    // CHECK: ds.matmul {{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h = ds.matmul %x, %s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %a = ds.relu %h : tensor<4x16xf32>
    // CHECK: ds.shard_slice %arg2 {{.*}} : (tensor<16x8xf32>) -> tensor<8x8xf32>
    // CHECK: ds.matmul {{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %y = ds.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    // CHECK: ds.all_reduce {{.*}} : tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }

  // CHECK-LABEL: func.func @gather
  func.func @gather(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %a = ds.shard %x {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<4x8xf32>
    // CHECK: ds.all_gather %{{.+}} {axes = ["tp"], dim = 1 : i64{{.*}}} : (tensor<4x4xf32>) -> tensor<4x8xf32>
    %sm = ds.softmax %a {axis = 1 : i64} : tensor<4x8xf32>
    return %sm : tensor<4x8xf32>
  }
}
