// ds-offload with device=nvme (ZeRO-Infinity's optimizer swapping): the
// moments go to NVMe, the gradient accumulators to host memory. Each NVMe
// moment is fetched (swapped in) to the host, updated there and offloaded
// (swapped out) into its global. Updates form sub-groups of sub_group_size
// elements: a sub-group's swap-ins run together before the previous
// sub-group's first update (the I/O thread reads group k+1 while group k
// computes), its swap-outs together after its last update.
// RUN: ds-opt %s --ds-offload=device=nvme | FileCheck %s
// RUN: ds-opt %s --ds-offload="device=nvme sub-group-size=4" | FileCheck %s --check-prefix=SUB
// RUN: ds-opt %s --ds-offload="device=nvme sub-group-size=4" --ds-plan-memory | FileCheck %s --check-prefix=PLANNED

// CHECK-DAG: @"adam_m:a" : tensor<4xf32> {ds.memory_space = #ds<memory_space nvme>}
// CHECK-DAG: @"adam_v:b" : tensor<4xf32> {ds.memory_space = #ds<memory_space nvme>}
// CHECK-DAG: @"grad:a" : tensor<4xf32> {ds.memory_space = #ds<memory_space host>}
// The default sub_group_size (1e9) makes both parameters one sub-group:
// four swap-ins, two updates, four swap-outs.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[MA:.*]] = ml_program.global_load @"adam_m:a"
// CHECK-NEXT: %[[MAH:.*]] = ds.fetch %[[MA]] : tensor<4xf32>
// CHECK-NEXT: ml_program.global_load @"adam_v:a"
// CHECK-NEXT: ds.fetch
// CHECK-NEXT: ml_program.global_load @"adam_m:b"
// CHECK-NEXT: ds.fetch
// CHECK-NEXT: ml_program.global_load @"adam_v:b"
// CHECK-NEXT: ds.fetch
// CHECK-NEXT: %{{.*}}, %[[NMA:.*]], %{{.*}} = ds.adam_update %{{.*}}, %{{.*}}, %[[MAH]], {{.*}}ds.memory_space = #ds<memory_space host>
// CHECK: ds.adam_update
// CHECK-NEXT: %[[OUT:.*]] = ds.offload %[[NMA]] : tensor<4xf32>
// CHECK-NEXT: ml_program.global_store @"adam_m:a" = %[[OUT]]
// CHECK-NEXT: ds.offload
// CHECK-NEXT: ml_program.global_store @"adam_v:a"
// CHECK-NEXT: ds.offload
// CHECK-NEXT: ml_program.global_store @"adam_m:b"
// CHECK-NEXT: ds.offload
// CHECK-NEXT: ml_program.global_store @"adam_v:b"

// With 4 elements a sub-group, each parameter is one: b's swap-ins move
// ahead of a's update, a's swap-outs follow a's update.
// SUB-LABEL: func.func @optimizer_step
// SUB: ml_program.global_load @"adam_m:a"
// SUB: ml_program.global_load @"adam_v:b"
// SUB-NEXT: ds.fetch
// SUB-NEXT: ds.adam_update
// SUB-NEXT: ds.offload
// SUB-NEXT: ml_program.global_store @"adam_m:a"
// SUB-NEXT: ds.offload
// SUB-NEXT: ml_program.global_store @"adam_v:a"
// SUB: ds.adam_update
// SUB-NEXT: ds.offload
// SUB-NEXT: ml_program.global_store @"adam_m:b"
// The swap-outs are written in place into their globals' regions.
// PLANNED-COUNT-4: ml_program.global_store @"adam_{{[mv]}}:{{[ab]}}" = %{{.*}} : tensor<4xf32> {ds.in_place}

module {
  ml_program.global private mutable @"param:a"(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private mutable @"param:b"(dense<2.0> : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private mutable @"grad:a" : tensor<4xf32>
  ml_program.global private mutable @"grad:b" : tensor<4xf32>
  ml_program.global private mutable @"adam_m:a" : tensor<4xf32>
  ml_program.global private mutable @"adam_v:a" : tensor<4xf32>
  ml_program.global private mutable @"adam_m:b" : tensor<4xf32>
  ml_program.global private mutable @"adam_v:b" : tensor<4xf32>
  func.func @optimizer_step(%lr: tensor<f32>, %s: tensor<f32>, %b2: tensor<f32>, %clip: tensor<f32>) -> tensor<f32> {
    %pa = ml_program.global_load @"param:a" : tensor<4xf32>
    %ga = ml_program.global_load @"grad:a" : tensor<4xf32>
    %ma = ml_program.global_load @"adam_m:a" : tensor<4xf32>
    %va = ml_program.global_load @"adam_v:a" : tensor<4xf32>
    %npa, %nma, %nva = ds.adam_update %pa, %ga, %ma, %va, %lr, %s, %b2, %clip {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, decoupled = true, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    ml_program.global_store @"param:a" = %npa : tensor<4xf32>
    ml_program.global_store @"adam_m:a" = %nma : tensor<4xf32>
    ml_program.global_store @"adam_v:a" = %nva : tensor<4xf32>
    %pb = ml_program.global_load @"param:b" : tensor<4xf32>
    %gb = ml_program.global_load @"grad:b" : tensor<4xf32>
    %mb = ml_program.global_load @"adam_m:b" : tensor<4xf32>
    %vb = ml_program.global_load @"adam_v:b" : tensor<4xf32>
    %npb, %nmb, %nvb = ds.adam_update %pb, %gb, %mb, %vb, %lr, %s, %b2, %clip {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, decoupled = true, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    ml_program.global_store @"param:b" = %npb : tensor<4xf32>
    ml_program.global_store @"adam_m:b" = %nmb : tensor<4xf32>
    ml_program.global_store @"adam_v:b" = %nvb : tensor<4xf32>
    return %lr : tensor<f32>
  }
}
