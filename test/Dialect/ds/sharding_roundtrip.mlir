// Mesh, shardings and collectives print and parse back; the collectives'
// shapes in the global view (same shape) and in ds.spmd functions (one
// rank's slice).
// RUN: ds-opt %s | ds-opt | FileCheck %s

// CHECK: module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>, <"tp" = 2>]>}
module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>, <"tp" = 2>]>} {
  // CHECK-LABEL: func.func @global
  func.func @global(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> tensor<4x8xf32> {
    // CHECK: ds.shard %{{.*}} {sharding = #ds.sharding<{{\[\[}}], ["tp"]]>} : tensor<4x8xf32>
    %s = ds.shard %x {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<4x8xf32>
    // CHECK: ds.shard_slice %{{.*}} {axes = ["tp"], dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = ds.shard_slice %x {axes = ["tp"], dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // CHECK: ds.all_reduce %{{.*}} {axes = ["dp", "tp"], ds.sharding = #ds.sharding<{{\[\[}}], []]>, reduction = #ds<reduction max>} : tensor<4x8xf32>
    %r = ds.all_reduce %l {axes = ["dp", "tp"], reduction = #ds<reduction max>, ds.sharding = #ds.sharding<[[], []]>} : tensor<4x8xf32>
    // CHECK: ds.matmul {{.*}}ds.sharding = #ds.sharding<{{\[\[}}], []], partial = ["tp"]>
    %m = ds.matmul %r, %w {ds.sharding = #ds.sharding<[[], []], partial = ["tp"]>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %r : tensor<4x8xf32>
  }
  // CHECK-LABEL: func.func @local
  func.func @local(%x: tensor<4x4xf32>) -> tensor<2x8xf32> attributes {ds.spmd} {
    // CHECK: ds.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x8xf32>
    %g = ds.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x8xf32>
    // CHECK: ds.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %rs = ds.reduce_scatter %g {axes = ["dp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    // CHECK: ds.all_to_all %{{.*}} {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<2x8xf32>) -> tensor<4x4xf32>
    %a = ds.all_to_all %rs {axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x4xf32>
    // CHECK: ds.broadcast %{{.*}} {axes = ["tp"], root = 1 : i64} : tensor<2x8xf32>
    %b = ds.broadcast %rs {axes = ["tp"], root = 1 : i64} : tensor<2x8xf32>
    return %b : tensor<2x8xf32>
  }
}
