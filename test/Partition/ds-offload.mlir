// ds-offload (ZeRO-Offload): a parameter's optimizer state and gradient
// accumulator move to host memory, the ops that write them run on the host,
// and transfers are inserted where values cross: the reduced gradient
// partition goes device->host as soon as its reduce_scatter completes, the
// updated parameter partition host->device before its all_gather, the norm's
// partial sum host->device before its all_reduce. Constants a host op reads
// are cloned onto the host. ds-plan-memory then gives host values their own
// arena.
// RUN: ds-opt %s --ds-offload=device=cpu | FileCheck %s
// RUN: ds-opt %s --ds-offload=device=cpu --ds-plan-memory | FileCheck %s --check-prefix=ARENA
// Without a device (and no ds.training asking for one) nothing changes.
// RUN: ds-opt %s --ds-offload | FileCheck %s --check-prefix=NONE

// CHECK-DAG: ml_program.global private mutable @"adam_m:w" : tensor<8xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK-DAG: ml_program.global private mutable @"adam_v:w" : tensor<8xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK-DAG: ml_program.global private mutable @"grad:w" : tensor<8xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK-DAG: ml_program.global private mutable @"param:w"({{.*}}) : tensor<3x5xf32>{{$}}
// NONE-NOT: memory_space
// NONE-NOT: ds.offload
// NONE-NOT: ds.fetch

module attributes {ds.mesh = #ds.mesh<[<"dp" = 2>]>} {
  ml_program.global private mutable @"adam_v:w" : tensor<8xf32>
  ml_program.global private mutable @"adam_m:w" : tensor<8xf32>
  ml_program.global private mutable @"grad:w" : tensor<8xf32>
  ml_program.global private mutable @"param:w"(dense<1.0> : tensor<3x5xf32>) : tensor<3x5xf32>

  // CHECK-LABEL: func.func @train_step
  // CHECK: %[[HALF:.*]] = ds.constant dense<5.000000e-01>
  // CHECK: %[[HALFH:.*]] = ds.constant {ds.memory_space = #ds<memory_space host>} dense<5.000000e-01>
  // CHECK: %[[RS:.*]] = ds.reduce_scatter
  // CHECK: %[[G:.*]] = ds.slice %[[RS]]
  // CHECK-NEXT: %[[GH:.*]] = ds.offload %[[G]] : tensor<8xf32>
  // CHECK: %[[ACC:.*]] = ds.fused_elementwise %[[GH]], %[[HALFH]], %{{.*}} {ds.memory_space = #ds<memory_space host>}
  // CHECK: ml_program.global_store @"grad:w" = %[[ACC]]
  // The loss stays on the device, with the device constant.
  // CHECK: ds.mul %{{.*}}, %[[HALF]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.func @train_step(%arg0: tensor<4x3xf32>, %arg1: tensor<4x5xf32>, %loss: tensor<f32>) -> tensor<f32> attributes {ds.spmd} {
    %0 = ds.constant dense<5.000000e-01> : tensor<f32>
    %1 = ds.fill 0.000000e+00 : tensor<1xf32>
    %9 = ds.matmul %arg0, %arg1 {transpose_lhs = true} : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %10 = ds.reshape %9 : (tensor<3x5xf32>) -> tensor<15xf32>
    %11 = ds.concat %10, %1 {axis = 0 : i64} : (tensor<15xf32>, tensor<1xf32>) -> tensor<16xf32>
    %16 = ds.reduce_scatter %11 {axes = ["dp"], dim = 0 : i64} : (tensor<16xf32>) -> tensor<8xf32>
    %17 = ds.slice %16 {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<8xf32>
    %grad = ml_program.global_load @"grad:w" : tensor<8xf32>
    %18 = ds.fused_elementwise %17, %0, %grad : (tensor<8xf32>, tensor<f32>, tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>):
      %23 = ds.mul %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %24 = ds.add %c, %23 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      ds.yield %24 : tensor<f32>
    }
    ml_program.global_store @"grad:w" = %18 : tensor<8xf32>
    %21 = ds.all_reduce %loss {axes = ["dp"]} : tensor<f32>
    %22 = ds.mul %21, %0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %22 : tensor<f32>
  }

  // CHECK-LABEL: func.func @optimizer_step
  // Scalars the host update reads cross once each, right where they appear.
  // CHECK: %[[LRH:.*]] = ds.offload %arg0 : tensor<f32>
  // CHECK: %[[SQ:.*]] = ds.sum_squares %{{.*}} {ds.memory_space = #ds<memory_space host>}
  // CHECK-NEXT: %[[SQD:.*]] = ds.fetch %[[SQ]] : tensor<f32>
  // CHECK-NEXT: ds.all_reduce %[[SQD]]
  // CHECK: %[[SLICE:.*]] = ds.shard_slice
  // CHECK-NEXT: %[[SLICEH:.*]] = ds.offload %[[SLICE]] : tensor<8xf32>
  // CHECK: %[[NEWP:.*]], %[[NEWM:.*]], %[[NEWV:.*]] = ds.adam_update %[[SLICEH]], %{{.*}}, %{{.*}}, %{{.*}}, %[[LRH]], {{.*}}ds.memory_space = #ds<memory_space host>
  // CHECK-NEXT: %[[NEWPD:.*]] = ds.fetch %[[NEWP]] : tensor<8xf32>
  // CHECK: ml_program.global_store @"adam_m:w" = %[[NEWM]]
  // CHECK: ds.all_gather %[[NEWPD]]
  // The zeroing of a host accumulator runs on the host.
  // CHECK: %[[ZERO:.*]] = ds.fill 0.000000e+00 {ds.memory_space = #ds<memory_space host>} : tensor<8xf32>
  // CHECK-NEXT: ml_program.global_store @"grad:w" = %[[ZERO]]
  func.func @optimizer_step(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<f32> attributes {ds.spmd} {
    %grad = ml_program.global_load @"grad:w" : tensor<8xf32>
    %2 = ds.sum_squares %grad : (tensor<8xf32>) -> tensor<f32>
    %3 = ds.all_reduce %2 {axes = ["dp"]} : tensor<f32>
    %4 = ds.sqrt %3 : tensor<f32>
    %param = ml_program.global_load @"param:w" : tensor<3x5xf32>
    %m = ml_program.global_load @"adam_m:w" : tensor<8xf32>
    %v = ml_program.global_load @"adam_v:w" : tensor<8xf32>
    %7 = ds.reshape %param : (tensor<3x5xf32>) -> tensor<15xf32>
    %8 = ds.fill 0.000000e+00 : tensor<1xf32>
    %9 = ds.concat %7, %8 {axis = 0 : i64} : (tensor<15xf32>, tensor<1xf32>) -> tensor<16xf32>
    %10 = ds.shard_slice %9 {axes = ["dp"], dim = 0 : i64} : (tensor<16xf32>) -> tensor<8xf32>
    %p, %nm, %nv = ds.adam_update %10, %grad, %m, %v, %arg0, %arg1, %arg2, %4 {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, decoupled = true, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    ml_program.global_store @"adam_m:w" = %nm : tensor<8xf32>
    ml_program.global_store @"adam_v:w" = %nv : tensor<8xf32>
    %14 = ds.all_gather %p {axes = ["dp"], dim = 0 : i64} : (tensor<8xf32>) -> tensor<16xf32>
    %18 = ds.slice %14 {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16xf32>) -> tensor<15xf32>
    %19 = ds.reshape %18 : (tensor<15xf32>) -> tensor<3x5xf32>
    ml_program.global_store @"param:w" = %19 : tensor<3x5xf32>
    %23 = ds.fill 0.000000e+00 : tensor<8xf32>
    ml_program.global_store @"grad:w" = %23 : tensor<8xf32>
    return %4 : tensor<f32>
  }
}

// The offloaded partitions live in the host arena, beside the device one.
// ARENA: func.func @train_step{{.*}}ds.arena_bytes = {{[0-9]+}} : i64, ds.host_arena_bytes = {{[1-9][0-9]*}} : i64
// ARENA: func.func @optimizer_step{{.*}}ds.arena_bytes = {{[0-9]+}} : i64, ds.host_arena_bytes = {{[1-9][0-9]*}} : i64
