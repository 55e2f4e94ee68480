// ds-quantize: products with constant f32 weights become ds.quantized_matmul,
// the weight quantized once (symmetric, per output channel or per group),
// their epilogues carried along.
// RUN: ds-opt %s --ds-quantize=scheme=int8-dynamic -split-input-file | FileCheck %s --check-prefix=I8
// RUN: ds-opt %s --ds-quantize="scheme=int4-weight group-size=2" -split-input-file | FileCheck %s --check-prefix=I4
// RUN: ds-opt %s --ds-quantize="scheme=int4-dynamic group-size=2" -split-input-file | FileCheck %s --check-prefix=W4A8
// RUN: ds-opt %s --ds-quantize="scheme=int8-weight keep-last=true" -split-input-file | FileCheck %s --check-prefix=KEEP
// RUN: ds-opt %s --ds-quantize="scheme=int8-weight skip=head" -split-input-file | FileCheck %s --check-prefix=SKIP

// Weight [K=4, N=2]: column 0 is (1, -2, 0.5, 0.25) -> scale 2/127, column 1
// (4, 0, -4, 2) -> scale 4/127; stored transposed [N, K].
// I8-LABEL: func.func @mlp
// I8-NOT: ds.fused_matmul
// I8: %[[W:.+]] = ds.constant dense<{{\[\[}}64, -127, 32, 16], [127, 0, -127, 64]]> : tensor<2x4xi8>
// I8: %[[S:.+]] = ds.constant dense<[0.0157480314, 0.0314960629]> : tensor<2xf32>
// I8: ds.quantized_matmul %{{.+}}, %[[W]], %[[S]] bias %{{.+}} {activation = #ds<activation gelu>, activation_quant = #ds<activation_quant dynamic_per_row>}
// I8-SAME: (tensor<3x4xf32>, tensor<2x4xi8>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
// The head (a plain matmul) too; the f32 weights are gone.
// I8: ds.quantized_matmul
// I8-NOT: ds.parameter "w1"
// Groups of 2 along K, 4 bits: column 0's groups (1, -2) and (0.5, 0.25):
// scales 2/7 and 0.5/7, values (3, -7) and (7, 3) (1 / (2/7) is 3.4999998
// in f32); + 8, two a byte, low nibble first: 11 + 16 * 1 = 27, 15 + 16 *
// 11 = 191.
// I4-LABEL: func.func @mlp
// I4: ds.constant dense<{{\[\[}}27, 191], [143, 177]]> : tensor<2x2xui8>
// I4: ds.constant dense<{{\[\[}}0.285714298, 0.0714285746], [0.571428597, 0.571428597]]> : tensor<2x2xf32>
// I4: ds.quantized_matmul {{.+}} {activation = #ds<activation gelu>, bits = 4 : i64, group_size = 2 : i64}
// int4-dynamic: the same int4 weights, activations per row at run time.
// W4A8-LABEL: func.func @mlp
// W4A8: ds.quantized_matmul {{.+}} {activation = #ds<activation gelu>, activation_quant = #ds<activation_quant dynamic_per_row>, bits = 4 : i64, group_size = 2 : i64}
// keep-last leaves the head in f32; skip=head leaves the product whose weight is named so.
// KEEP-LABEL: func.func @mlp
// KEEP: ds.quantized_matmul
// KEEP: ds.matmul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x5xf32>)
// SKIP-LABEL: func.func @mlp
// SKIP: ds.quantized_matmul
// SKIP: ds.matmul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x5xf32>)
func.func @mlp(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %w1 = ds.parameter "w1" = dense<[[1.0, 4.0], [-2.0, 0.0], [0.5, -4.0], [0.25, 2.0]]> : tensor<4x2xf32>
  %b1 = ds.parameter "b1" = dense<[0.5, -0.5]> : tensor<2xf32>
  %w2 = ds.parameter "head" = dense<0.5> : tensor<2x5xf32>
  %h = ds.fused_matmul %x, %w1 bias %b1 {activation = #ds<activation gelu>} : (tensor<3x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %y = ds.matmul %h, %w2 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Left alone: a product of two values, a softmax row epilogue, and a
// weight whose K the group size does not divide (int4's group of 2 takes
// K = 3 nowhere).
// I8-LABEL: func.func @left
// I8-NOT: ds.quantized_matmul
// I4-LABEL: func.func @left
// I4-NOT: ds.quantized_matmul
// W4A8-LABEL: func.func @left
func.func @left(%x: tensor<3x4xf32>, %y: tensor<4x2xf32>) -> (tensor<3x2xf32>, tensor<3x4xf32>) {
  %a = ds.matmul %x, %y : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %w = ds.constant dense<1.0> : tensor<4x4xf32>
  %s = ds.fused_matmul %x, %w {softmax} : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  return %a, %s : tensor<3x2xf32>, tensor<3x4xf32>
}

// -----

// A tensor-parallel rank's block of a weight (ds.shard_slice after
// ds-global-to-local): the whole weight is quantized, and the rank takes
// its block of the quantized weight and scales. Column-parallel [K=4, N=4]
// cut along N: the int8 [N, K] weight and the per-channel scales along
// dimension 0. Row-parallel cut along K: the weight along dimension 1 and
// the per-channel scales whole (one scale per row serves every K block);
// int4 groups of 2 cut along K with their group scales.
// I8-LABEL: func.func @rank_blocks
// I8: %[[W1:.+]] = ds.constant {{.+}} : tensor<4x4xi8>
// I8: %[[S1:.+]] = ds.constant {{.+}} : tensor<4xf32>
// I8: %[[B1:.+]] = ds.shard_slice %[[W1]] {axes = ["tp"], dim = 0 : i64} : (tensor<4x4xi8>) -> tensor<2x4xi8>
// I8: %[[C1:.+]] = ds.shard_slice %[[S1]] {axes = ["tp"], dim = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>
// I8: ds.quantized_matmul %{{.+}}, %[[B1]], %[[C1]]
// I8: %[[W2:.+]] = ds.constant {{.+}} : tensor<3x4xi8>
// I8: %[[S2:.+]] = ds.constant {{.+}} : tensor<3xf32>
// I8: %[[B2:.+]] = ds.shard_slice %[[W2]] {axes = ["tp"], dim = 1 : i64} : (tensor<3x4xi8>) -> tensor<3x2xi8>
// I8: ds.quantized_matmul %{{.+}}, %[[B2]], %[[S2]]
// I8-NOT: ds.parameter
// I4-LABEL: func.func @rank_blocks
// I4: ds.shard_slice {{.+}} dim = 0 {{.+}} : (tensor<4x2xui8>) -> tensor<2x2xui8>
// I4: ds.shard_slice {{.+}} dim = 0 {{.+}} : (tensor<4x2xf32>) -> tensor<2x2xf32>
// I4: ds.shard_slice {{.+}} dim = 1 {{.+}} : (tensor<3x2xui8>) -> tensor<3x1xui8>
// I4: ds.shard_slice {{.+}} dim = 1 {{.+}} : (tensor<3x2xf32>) -> tensor<3x1xf32>
module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  func.func @rank_blocks(%x: tensor<3x4xf32>) -> tensor<3x3xf32> attributes {ds.spmd} {
    %w1 = ds.parameter "fc1" = dense<[[1.0, 4.0, 2.0, -1.0], [-2.0, 0.0, 1.0, 3.0], [0.5, -4.0, 0.0, 1.0], [0.25, 2.0, 1.0, 0.5]]> : tensor<4x4xf32>
    %w2 = ds.parameter "fc2" = dense<[[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0], [0.25, -2.0, 1.0], [4.0, 1.0, -3.0]]> : tensor<4x3xf32>
    %s1 = ds.shard_slice %w1 {axes = ["tp"], dim = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x2xf32>
    %h = ds.matmul %x, %s1 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %s2 = ds.shard_slice %w2 {axes = ["tp"], dim = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %y = ds.matmul %h, %s2 : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %r = ds.all_reduce %y {axes = ["tp"]} : tensor<3x3xf32>
    return %r : tensor<3x3xf32>
  }
}
