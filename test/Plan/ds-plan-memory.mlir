// ds-plan-memory packs intermediates into one arena by liveness.
// RUN: ds-opt %s --ds-plan-memory -split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-plan-memory=alignment=16 -split-input-file | FileCheck %s --check-prefix=A16
// RUN: not ds-opt %s --ds-plan-memory=alignment=3 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: ds-opt %s --ds-plan-memory=views=false -split-input-file | FileCheck %s --check-prefix=NOVIEW

// A chain needs two slots: each value dies once its successor is computed.
// The returned value lives in an output buffer, not the arena.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: ds.arena_bytes = 80
// CHECK: ds.exp %{{.*}} {ds.arena_offsets = array<i64: 0>}
// CHECK: ds.exp %{{.*}} {ds.arena_offsets = array<i64: 64>}
// CHECK: ds.exp %{{.*}} {ds.arena_offsets = array<i64: 0>}
// CHECK: ds.exp %{{.*}} {ds.arena_offsets = array<i64: -1>}
// A16-LABEL: func.func @chain
// A16-SAME: ds.arena_bytes = 32
// BAD: alignment must be a power of two, got 3
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ds.exp %x : tensor<4xf32>
  %1 = ds.exp %0 : tensor<4xf32>
  %2 = ds.exp %1 : tensor<4xf32>
  %3 = ds.exp %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// A value used late keeps its slot; the big one is placed first.
// CHECK-LABEL: func.func @long_lived
// CHECK-SAME: ds.arena_bytes = 592
// CHECK: %[[A:.+]] = ds.exp %{{.*}} {ds.arena_offsets = array<i64: 512>} : tensor<4xf32>
// CHECK: %[[B:.+]] = ds.expand %[[A]] {ds.arena_offsets = array<i64: 0>}
// CHECK: ds.reduce_sum %[[B]] {axes = array<i64: 0>, ds.arena_offsets = array<i64: 576>}
func.func @long_lived(%x: tensor<4xf32>) -> tensor<1x4xf32> {
  %a = ds.exp %x : tensor<4xf32>
  %b = ds.expand %a : (tensor<4xf32>) -> tensor<32x4xf32>
  %c = ds.reduce_sum %b {axes = array<i64: 0>} : (tensor<32x4xf32>) -> tensor<1x4xf32>
  %d = ds.add %c, %a : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  return %d : tensor<1x4xf32>
}

// -----

// Constants and parameters take no arena space.
// CHECK-LABEL: func.func @weights
// CHECK-SAME: ds.arena_bytes = 0
// CHECK: ds.parameter "w"
// CHECK-NOT: ds.arena_offsets = array<i64: 0>
func.func @weights(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = ds.parameter "w" = dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = ds.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A collective runs on the communication thread and reads its operand until
// the first reader of its result waits for it: the operand's bytes (%a at 0)
// are not handed to %c or %d, which run while the reduce-scatter is in
// flight, so they can overlap it.
// CHECK-LABEL: func.func @collective_operand
// CHECK: %[[A:.+]] = ds.exp %{{.*}} {ds.arena_offsets = array<i64: 0>}
// CHECK: ds.reduce_scatter %[[A]] {axes = ["dp"], dim = 0 : i64, ds.arena_offsets = array<i64: {{[1-9][0-9]*}}>}
// CHECK: ds.exp %arg1 {ds.arena_offsets = array<i64: {{[1-9][0-9]*}}>}
// CHECK: ds.exp %{{.*}} {ds.arena_offsets = array<i64: {{[1-9][0-9]*}}>}
module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  func.func @collective_operand(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) attributes {ds.spmd} {
    %a = ds.exp %x : tensor<8xf32>
    %r = ds.reduce_scatter %a {axes = ["dp"], dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    %c = ds.exp %y : tensor<8xf32>
    %d = ds.exp %c : tensor<8xf32>
    %e = ds.exp %r : tensor<4xf32>
    %f = ds.exp %d : tensor<8xf32>
    return %e, %f : tensor<4xf32>, tensor<8xf32>
  }
}

// -----

// A reshape (squeeze, unsqueeze) of an arena value is a view: same offset,
// ds.arena_view, one live range for both (the view's last use keeps the
// operand's bytes); reshapes of arguments and of results returned are
// copies into their own home.
// CHECK-LABEL: func.func @views
// CHECK-SAME: ds.arena_bytes = 80
// CHECK: %[[E:.+]] = ds.exp %arg0 {ds.arena_offsets = array<i64: [[OFF:[0-9]+]]>}
// CHECK: %[[R:.+]] = ds.reshape %[[E]] {ds.arena_offsets = array<i64: [[OFF]]>, ds.arena_view}
// CHECK: %[[S:.+]] = ds.unsqueeze %[[R]] {axes = array<i64: 0>, ds.arena_offsets = array<i64: [[OFF]]>, ds.arena_view}
// CHECK: ds.exp %[[S]] {ds.arena_offsets = array<i64: -1>}
// CHECK: ds.reshape %arg0 {ds.arena_offsets = array<i64: {{[0-9]+}}>}
// CHECK-NOT: ds.arena_view
// CHECK: ds.reshape %{{.+}} {ds.arena_offsets = array<i64: -1>}
// CHECK: return
// NOVIEW-LABEL: func.func @views
// NOVIEW-NOT: ds.arena_view
func.func @views(%x: tensor<2x2xf32>) -> (tensor<1x4xf32>, tensor<2x2xf32>) {
  %e = ds.exp %x : tensor<2x2xf32>
  %r = ds.reshape %e : (tensor<2x2xf32>) -> tensor<4xf32>
  %s = ds.unsqueeze %r {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<1x4xf32>
  %f = ds.exp %s : tensor<1x4xf32>
  %a = ds.reshape %x : (tensor<2x2xf32>) -> tensor<4xf32>
  %g = ds.exp %a : tensor<4xf32>
  %h = ds.exp %g : tensor<4xf32>
  %o = ds.reshape %h : (tensor<4xf32>) -> tensor<2x2xf32>
  return %f, %o : tensor<1x4xf32>, tensor<2x2xf32>
}
