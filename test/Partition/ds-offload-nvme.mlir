// ds-offload with device=nvme (ZeRO-Infinity's optimizer swapping): the
// moments go to NVMe, the gradient accumulators to host memory. Each NVMe
// moment is fetched (swapped in) to the host, updated there and offloaded
// (swapped out) into its global; the second parameter's swap-ins are moved
// ahead of the first parameter's update, so the I/O thread reads them while
// it computes.
// RUN: ds-opt %s --ds-offload=device=nvme | FileCheck %s
// RUN: ds-opt %s --ds-offload=device=nvme --ds-plan-memory | FileCheck %s --check-prefix=PLANNED

// CHECK-DAG: @"adam_m:a" : tensor<4xf32> {ds.memory_space = #ds<memory_space nvme>}
// CHECK-DAG: @"adam_v:b" : tensor<4xf32> {ds.memory_space = #ds<memory_space nvme>}
// CHECK-DAG: @"grad:a" : tensor<4xf32> {ds.memory_space = #ds<memory_space host>}
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[MA:.*]] = ml_program.global_load @"adam_m:a"
// CHECK-NEXT: %[[MAH:.*]] = ds.fetch %[[MA]] : tensor<4xf32>
// CHECK: %[[MB:.*]] = ml_program.global_load @"adam_m:b"
// CHECK-NEXT: ds.fetch %[[MB]] : tensor<4xf32>
// CHECK: ml_program.global_load @"adam_v:b"
// CHECK-NEXT: ds.fetch
// CHECK: %{{.*}}, %[[NMA:.*]], %{{.*}} = ds.adam_update %{{.*}}, %{{.*}}, %[[MAH]], {{.*}}ds.memory_space = #ds<memory_space host>
// CHECK: %[[OUT:.*]] = ds.offload %[[NMA]] : tensor<4xf32>
// CHECK: ml_program.global_store @"adam_m:a" = %[[OUT]]
// CHECK: ds.adam_update
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
