// ds-schedule-zero: DeepSpeed's bucket and overlap knobs decide how the
// ZeRO collectives are grouped and when they are issued.
//
// Both gradients fit one reduce bucket: one reduce_scatter over the members
// side by side ([ranks, block] pieces joined on the block dimension), each
// member's block sliced out; overlap_comm issues it as soon as the last
// gradient exists, before the compute that follows.
// RUN: ds-opt %s --ds-schedule-zero="stage=2 overlap-comm=1" | FileCheck %s
// Without overlap_comm the bucket waits for the first use of its result.
// RUN: ds-opt %s --ds-schedule-zero="stage=2 overlap-comm=0" | FileCheck %s --check-prefix=LATE
// A bucket of 8 elements cannot hold both (8 + 4): two reduce_scatters.
// RUN: ds-opt %s --ds-schedule-zero="stage=2 overlap-comm=1 reduce-bucket-size=8" | FileCheck %s --check-prefix=SMALL
// allgather_bucket_size: the optimizer's parameter all_gathers, bucketed.
// RUN: ds-opt %s --ds-schedule-zero="stage=1" | FileCheck %s --check-prefix=AG
// RUN: ds-opt %s --ds-schedule-zero="stage=1 allgather-bucket-size=3" | FileCheck %s --check-prefix=AGSMALL
// Stage 0: the gradient all_reduces, flattened and joined.
// RUN: ds-opt %s --ds-schedule-zero="stage=0" | FileCheck %s --check-prefix=AR
// ZeRO++'s qgZ at stage 3: the bucket's one reduce_scatter sends int8 blocks.
// RUN: ds-opt %s --ds-schedule-zero="stage=3 overlap-comm=1 quantized-gradients=1" | FileCheck %s --check-prefix=QGZ

module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  ml_program.global private mutable @"grad:a" : tensor<4xf32>
  ml_program.global private mutable @"grad:b" : tensor<2xf32>
  ml_program.global private mutable @"param:a" : tensor<4xf32>
  ml_program.global private mutable @"param:b" : tensor<2xf32>

  // QGZ-LABEL: func.func @train_step
  // QGZ: ds.reduce_scatter %{{.+}} {axes = ["dp"], dim = 0 : i64, quantize_block = 256 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  // QGZ-NOT: ds.reduce_scatter
  // CHECK-LABEL: func.func @train_step
  // CHECK: %[[GA:.+]] = ds.mul %arg0, %arg0
  // CHECK: %[[GB:.+]] = ds.mul %arg1, %arg1
  // CHECK: %[[PA:.+]] = ds.reshape %[[GA]] : (tensor<8xf32>) -> tensor<2x4xf32>
  // CHECK: %[[PB:.+]] = ds.reshape %[[GB]] : (tensor<4xf32>) -> tensor<2x2xf32>
  // CHECK: %[[J:.+]] = ds.concat %[[PA]], %[[PB]] {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  // CHECK: %[[F:.+]] = ds.reshape %[[J]] : (tensor<2x6xf32>) -> tensor<12xf32>
  // CHECK: %[[RS:.+]] = ds.reduce_scatter %[[F]] {axes = ["dp"], dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  // CHECK: ds.add %arg0, %arg0
  // Each member's block is sliced out only where it is first used.
  // CHECK: %[[A:.+]] = ds.slice %[[RS]] {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<4xf32>
  // CHECK-NEXT: ds.add %{{.+}}, %[[A]]
  // CHECK: %[[B:.+]] = ds.slice %[[RS]] {starts = array<i64: 4>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<2xf32>
  // CHECK-NEXT: ds.add %{{.+}}, %[[B]]
  // CHECK-NOT: ds.reduce_scatter
  // LATE-LABEL: func.func @train_step
  // LATE: ds.add %arg0, %arg0
  // LATE: ml_program.global_load @"grad:a"
  // LATE: ds.reduce_scatter %{{.+}} {axes = ["dp"], dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  // LATE: ds.add
  // SMALL-LABEL: func.func @train_step
  // SMALL: ds.reduce_scatter %{{.+}} : (tensor<8xf32>) -> tensor<4xf32>
  // SMALL: ds.reduce_scatter %{{.+}} : (tensor<4xf32>) -> tensor<2xf32>
  // SMALL-NOT: ds.concat
  // SMALL: return %{{.+}} : tensor<8xf32>
  func.func @train_step(%x: tensor<8xf32>, %y: tensor<4xf32>) -> tensor<8xf32> attributes {ds.spmd} {
    %ga = ds.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %ra = ds.reduce_scatter %ga {axes = ["dp"], dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    %gb = ds.mul %y, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %rb = ds.reduce_scatter %gb {axes = ["dp"], dim = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    %z = ds.add %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %acca = ml_program.global_load @"grad:a" : tensor<4xf32>
    %sa = ds.add %acca, %ra : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ml_program.global_store @"grad:a" = %sa : tensor<4xf32>
    %accb = ml_program.global_load @"grad:b" : tensor<2xf32>
    %sb = ds.add %accb, %rb : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    ml_program.global_store @"grad:b" = %sb : tensor<2xf32>
    return %z : tensor<8xf32>
  }

  // The new blocks joined, one all_gather viewed as [ranks, 3], each
  // parameter's columns sliced; the stores move below it.
  // AG-LABEL: func.func @optimizer_step
  // AG: %[[NP:.+]] = ds.mul %arg0, %arg0
  // AG: %[[NQ:.+]] = ds.mul %arg1, %arg1
  // AG: %[[C:.+]] = ds.concat %[[NP]], %[[NQ]] {axis = 0 : i64} : (tensor<2xf32>, tensor<1xf32>) -> tensor<3xf32>
  // AG: %[[G:.+]] = ds.all_gather %[[C]] {axes = ["dp"], dim = 0 : i64} : (tensor<3xf32>) -> tensor<6xf32>
  // AG: %[[V:.+]] = ds.reshape %[[G]] : (tensor<6xf32>) -> tensor<2x3xf32>
  // AG: %[[SA:.+]] = ds.slice %[[V]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  // AG: %[[WA:.+]] = ds.reshape %[[SA]] : (tensor<2x2xf32>) -> tensor<4xf32>
  // AG: ml_program.global_store @"param:a" = %[[WA]]
  // AG: %[[SB:.+]] = ds.slice %[[V]] {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  // AG: %[[WB:.+]] = ds.reshape %[[SB]] : (tensor<2x1xf32>) -> tensor<2xf32>
  // AG: ml_program.global_store @"param:b" = %[[WB]]
  // AGSMALL-LABEL: func.func @optimizer_step
  // AGSMALL: ds.all_gather %{{.+}} : (tensor<2xf32>) -> tensor<4xf32>
  // AGSMALL: ml_program.global_store @"param:a"
  // AGSMALL: ds.all_gather %{{.+}} : (tensor<1xf32>) -> tensor<2xf32>
  func.func @optimizer_step(%p: tensor<2xf32>, %q: tensor<1xf32>) attributes {ds.spmd} {
    %np = ds.mul %p, %p : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %ga = ds.all_gather %np {axes = ["dp"], dim = 0 : i64} : (tensor<2xf32>) -> tensor<4xf32>
    ml_program.global_store @"param:a" = %ga : tensor<4xf32>
    %nq = ds.mul %q, %q : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
    %gb = ds.all_gather %nq {axes = ["dp"], dim = 0 : i64} : (tensor<1xf32>) -> tensor<2xf32>
    ml_program.global_store @"param:b" = %gb : tensor<2xf32>
    return
  }

  // AR-LABEL: func.func @averaged
  // AR: %[[FG:.+]] = ds.reshape %arg0 : (tensor<2x2xf32>) -> tensor<4xf32>
  // AR: %[[J:.+]] = ds.concat %[[FG]], %arg1 {axis = 0 : i64} : (tensor<4xf32>, tensor<3xf32>) -> tensor<7xf32>
  // AR: %[[S:.+]] = ds.all_reduce %[[J]] {axes = ["dp"]} : tensor<7xf32>
  // AR: %[[G:.+]] = ds.slice %[[S]] {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<7xf32>) -> tensor<4xf32>
  // AR: %[[G2:.+]] = ds.reshape %[[G]] : (tensor<4xf32>) -> tensor<2x2xf32>
  // AR: %[[H:.+]] = ds.slice %[[S]] {starts = array<i64: 4>, steps = array<i64: 1>} : (tensor<7xf32>) -> tensor<3xf32>
  // AR: return %[[G2]], %[[H]]
  func.func @averaged(%g: tensor<2x2xf32>, %h: tensor<3xf32>) -> (tensor<2x2xf32>, tensor<3xf32>) {
    %s = ds.all_reduce %g {axes = ["dp"]} : tensor<2x2xf32>
    %t = ds.all_reduce %h {axes = ["dp"]} : tensor<3xf32>
    return %s, %t : tensor<2x2xf32>, tensor<3xf32>
  }
}
