// ds-schedule-zero at stage 3: which parameter gathers are kept for a later
// use (stage3_max_reuse_distance), how far ahead they are issued
// (stage3_prefetch_bucket_size), both bounded by stage3_max_live_parameters.
// Parameters a and b (4 elements each, gathered) are used a, b, b, a: a
// forward and the backward in reverse.
//
// No reuse, no prefetch: a gather right before every use.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=0 max-reuse-distance=0" | FileCheck %s --check-prefix=EACH
// Reuse (DeepSpeed's default distance 1e9): b's and a's gathers serve their second use.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=0" | FileCheck %s --check-prefix=REUSE
// A distance of 4: b's second use follows at once and reuses; 4 elements of b
// are gathered between a's uses, so a is gathered again.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=0 max-reuse-distance=4" | FileCheck %s --check-prefix=NEAR
// Prefetch of 8 elements: each gather is issued before the previous
// parameter's use, so while one is in use the next is in flight.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=8 max-reuse-distance=0" | FileCheck %s --check-prefix=PREFETCH
// ... unless that would make more than 7 gathered elements live at once.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=8 max-reuse-distance=0 max-live-parameters=7" | FileCheck %s --check-prefix=EACH
// ZeRO++'s qwZ: every parameter gather of the step sends int8 blocks of 256.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 prefetch-bucket-size=0 max-reuse-distance=0 quantized-weights=1" | FileCheck %s --check-prefix=QWZ

module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  ml_program.global private mutable @"param:a" : tensor<2xf32>
  ml_program.global private mutable @"param:b" : tensor<2xf32>
  // EACH: %[[A:.+]] = ds.all_gather %param3Aa
  // EACH-NEXT: %[[H:.+]] = ds.mul %arg0, %[[A]]
  // EACH-NEXT: %[[B:.+]] = ds.all_gather %param3Ab
  // EACH-NEXT: %[[O:.+]] = ds.mul %[[H]], %[[B]]
  // EACH-NEXT: %[[B2:.+]] = ds.all_gather %param3Ab
  // EACH-NEXT: %[[D:.+]] = ds.mul %[[O]], %[[B2]]
  // EACH-NEXT: %[[A2:.+]] = ds.all_gather %param3Aa
  // EACH-NEXT: ds.mul %[[D]], %[[A2]]
  //
  // REUSE: %[[A:.+]] = ds.all_gather %param3Aa
  // REUSE-NEXT: %[[H:.+]] = ds.mul %arg0, %[[A]]
  // REUSE-NEXT: %[[B:.+]] = ds.all_gather %param3Ab
  // REUSE-NEXT: %[[O:.+]] = ds.mul %[[H]], %[[B]]
  // REUSE-NEXT: %[[D:.+]] = ds.mul %[[O]], %[[B]]
  // REUSE-NEXT: ds.mul %[[D]], %[[A]]
  // REUSE-NOT: ds.all_gather
  //
  // NEAR: %[[B:.+]] = ds.all_gather %param3Ab
  // NEAR-NEXT: %[[O:.+]] = ds.mul %{{.+}}, %[[B]]
  // NEAR-NEXT: %[[D:.+]] = ds.mul %[[O]], %[[B]]
  // NEAR-NEXT: %[[A2:.+]] = ds.all_gather %param3Aa
  // NEAR-NEXT: ds.mul %[[D]], %[[A2]]
  //
  // PREFETCH: %[[A:.+]] = ds.all_gather %param3Aa
  // PREFETCH-NEXT: %[[B:.+]] = ds.all_gather %param3Ab
  // PREFETCH-NEXT: %[[H:.+]] = ds.mul %arg0, %[[A]]
  // PREFETCH-NEXT: %[[B2:.+]] = ds.all_gather %param3Ab
  // PREFETCH-NEXT: %[[O:.+]] = ds.mul %[[H]], %[[B]]
  // PREFETCH-NEXT: %[[A2:.+]] = ds.all_gather %param3Aa
  // PREFETCH-NEXT: %[[D:.+]] = ds.mul %[[O]], %[[B2]]
  // PREFETCH-NEXT: ds.mul %[[D]], %[[A2]]
  //
  // QWZ-COUNT-4: ds.all_gather %param3A{{a|b}} {axes = ["dp"], dim = 0 : i64, quantize_block = 256 : i64}
  // QWZ-NOT: ds.all_gather
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {ds.spmd} {
    %a = ml_program.global_load @"param:a" : tensor<2xf32>
    %b = ml_program.global_load @"param:b" : tensor<2xf32>
    %wa = ds.all_gather %a {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %h = ds.mul %x, %wa : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wb = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %o = ds.mul %h, %wb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wb2 = ds.all_gather %b {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %d = ds.mul %o, %wb2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wa2 = ds.all_gather %a {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    %e = ds.mul %d, %wa2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %e : tensor<4xf32>
  }
}
