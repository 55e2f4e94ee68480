// ds-schedule-zero at stage 3 on shapes ds-data-parallel leaves: what the
// reuse and prefetch decisions must not break.
// RUN: ds-opt %s -split-input-file --ds-schedule-zero="stage=3 prefetch-bucket-size=0" | FileCheck %s --check-prefix=FUSED
// RUN: ds-opt %s -split-input-file --ds-schedule-zero="stage=3 prefetch-bucket-size=12 max-reuse-distance=0 max-live-parameters=4" | FileCheck %s --check-prefix=UNDO

// A fused weight (6 elements, no padding, rank 1: nothing to unpad or
// reshape) used through three slices of its own, each with its gather: the
// reuse shares the gathered tensor, never one use's slice for another's.
// FUSED-LABEL: func.func @fused
// FUSED: %[[W:.+]] = ds.all_gather
// FUSED-NOT: ds.all_gather
// FUSED-DAG: ds.slice %[[W]] {starts = array<i64: 0>
// FUSED-DAG: ds.slice %[[W]] {starts = array<i64: 2>
// FUSED-DAG: ds.slice %[[W]] {starts = array<i64: 4>
module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  ml_program.global private mutable @"param:w" : tensor<3xf32> {ds.partition_numel = 6 : i64, ds.partition_shape = array<i64: 6>}
  func.func @fused() -> tensor<2xf32> attributes {ds.spmd} {
    %b = ml_program.global_load @"param:w" : tensor<3xf32>
    %g1 = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<3xf32>) -> tensor<6xf32>
    %q = ds.slice %g1 {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<2xf32>
    %g2 = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<3xf32>) -> tensor<6xf32>
    %k = ds.slice %g2 {starts = array<i64: 2>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<2xf32>
    %g3 = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<3xf32>) -> tensor<6xf32>
    %v = ds.slice %g3 {starts = array<i64: 4>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<2xf32>
    %x = ds.add %q, %k : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %y = ds.add %x, %v : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %y : tensor<2xf32>
  }
}

// -----

// A parameter loaded mid-function (as the importer's transposed Gemm
// weights are): prefetching b's gathers above a's use would exceed the live
// bound of 4 elements, so it is undone; the load may stay hoisted, but
// every gather still follows it and sits right before its use.
// UNDO-LABEL: func.func @undo
// UNDO: %[[A:.+]] = ds.all_gather %param3Aa
// UNDO: %[[H:.+]] = ds.mul %arg0, %[[A]]
// UNDO: %[[B:.+]] = ds.all_gather %param3Ab
// UNDO-NEXT: %[[O:.+]] = ds.mul %[[H]], %[[B]]
// UNDO-NEXT: %[[B2:.+]] = ds.all_gather %param3Ab
// UNDO-NEXT: ds.mul %[[O]], %[[B2]]
module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  ml_program.global private mutable @"param:a" : tensor<2xf32>
  ml_program.global private mutable @"param:b" : tensor<2xf32>
  func.func @undo(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ds.spmd} {
    %a = ml_program.global_load @"param:a" : tensor<2xf32>
    %wa = ds.all_gather %a {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %h = ds.mul %x, %wa : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %b = ml_program.global_load @"param:b" : tensor<2xf32>
    %wb = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %o = ds.mul %h, %wb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wb2 = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %d = ds.mul %o, %wb2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %d : tensor<4xf32>
  }
}
