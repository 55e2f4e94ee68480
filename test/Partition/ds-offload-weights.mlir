// ds-offload weights=cpu (ZeRO-Inference): an inference program's weights
// of at least weights-threshold elements live in host memory; each reader
// gets its own ds.fetch, issued a layer ahead (readers per attention: here
// two layers of two products each, so each fetch moves before the product
// two readers earlier: layer 1's weights arrive while layer 0 computes). An embedding lookup runs on the host (the ids go
// there, the rows come back); small weights stay on the device.
// RUN: ds-opt %s --ds-offload="weights=cpu weights-threshold=16" | FileCheck %s
// RUN: ds-opt %s --ds-offload="weights=cpu weights-threshold=16" --ds-plan-memory | FileCheck %s --check-prefix=ARENA
// RUN: ds-opt %s --ds-offload="weights=nvme weights-threshold=16" | FileCheck %s --check-prefix=NVME
// RUN: not ds-opt %s --ds-offload="weights=disk" 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @layers
// CHECK: %[[EMB:.+]] = ds.parameter "emb" {{.+}} {ds.memory_space = #ds<memory_space host>}
// CHECK: %[[IDS:.+]] = ds.offload %arg0
// CHECK: %[[ROWS:.+]] = ds.gather %[[EMB]], %[[IDS]] {axis = 0 : i64, ds.memory_space = #ds<memory_space host>}
// CHECK: %[[X:.+]] = ds.fetch %[[ROWS]]
// Layer 0's weights and layer 1's first are fetched before the first
// product, layer 1's second before the second (two readers ahead).
// CHECK: %[[W0:.+]] = ds.parameter "w0" {{.+}}memory_space host
// CHECK: %[[F0:.+]] = ds.fetch %[[W0]]
// CHECK: %[[F1:.+]] = ds.fetch
// CHECK: %[[F2:.+]] = ds.fetch
// CHECK: ds.matmul %[[X]], %[[F0]]
// CHECK: %[[F3:.+]] = ds.fetch
// CHECK: ds.matmul %{{.+}}, %[[F1]]
// CHECK: ds.attention
// CHECK: ds.matmul %{{.+}}, %[[F2]]
// CHECK: ds.matmul %{{.+}}, %[[F3]]
// The small bias stays on the device.
// CHECK: ds.parameter "bias" = dense<1.000000e+00> : tensor<8xf32>{{$}}
// ARENA-LABEL: func.func @layers
// ARENA-SAME: ds.host_arena_bytes
// BAD: ds-offload: weights 'disk' is not supported (cpu, nvme or none)
// From NVMe: each weight a global on the drive; a reader's swap-in (load,
// NVMe -> host) two layers ahead, its fetch to the device one layer ahead.
// NVME-DAG: ml_program.global private mutable @"weight:w0"(dense<1.000000e-01> : tensor<8x8xf32>) : tensor<8x8xf32> {ds.memory_space = #ds<memory_space nvme>}
// NVME-DAG: ml_program.global private mutable @"weight:emb"
// NVME-LABEL: func.func @layers
// NVME: %[[E:.+]] = ml_program.global_load @"weight:emb"
// NVME: %[[EH:.+]] = ds.fetch %[[E]]
// NVME: ds.gather %[[EH]], %{{.+}} {axis = 0 : i64, ds.memory_space = #ds<memory_space host>}
// NVME: %[[L0:.+]] = ml_program.global_load @"weight:w0"
// NVME: %[[H0:.+]] = ds.fetch %[[L0]]
// NVME: %[[D0:.+]] = ds.fetch %[[H0]]
// NVME: ml_program.global_load @"weight:w3"
// NVME: %[[H3:.+]] = ds.fetch
// NVME: ds.matmul %{{.+}}, %[[D0]]
// NVME: %[[D3:.+]] = ds.fetch %[[H3]]
// NVME: ds.matmul %{{.+}}, %[[D3]]
// NVME-NOT: ds.parameter "w
// NVME: ds.parameter "bias"
func.func @layers(%ids: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = ds.parameter "emb" = dense<0.5> : tensor<16x8xf32>
  %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %w0 = ds.parameter "w0" = dense<0.1> : tensor<8x8xf32>
  %a0 = ds.matmul %x, %w0 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %w1 = ds.parameter "w1" = dense<0.2> : tensor<8x8xf32>
  %b0 = ds.matmul %a0, %w1 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %h0 = ds.attention %b0, %b0, %b0 {query_shape = array<i64: 1, 1, 4, 8>, query_strides = array<i64: 32, 8, 8, 1>, key_shape = array<i64: 1, 1, 4, 8>, key_strides = array<i64: 32, 8, 8, 1>, value_shape = array<i64: 1, 1, 4, 8>, value_strides = array<i64: 32, 8, 8, 1>, scale = 0.35 : f64, result_bshd} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x1x8xf32>
  %r0 = ds.reshape %h0 : (tensor<1x4x1x8xf32>) -> tensor<1x4x8xf32>
  %w2 = ds.parameter "w2" = dense<0.3> : tensor<8x8xf32>
  %a1 = ds.matmul %r0, %w2 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %w3 = ds.parameter "w3" = dense<0.4> : tensor<8x8xf32>
  %b1 = ds.matmul %a1, %w3 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %h1 = ds.attention %b1, %b1, %b1 {query_shape = array<i64: 1, 1, 4, 8>, query_strides = array<i64: 32, 8, 8, 1>, key_shape = array<i64: 1, 1, 4, 8>, key_strides = array<i64: 32, 8, 8, 1>, value_shape = array<i64: 1, 1, 4, 8>, value_strides = array<i64: 32, 8, 8, 1>, scale = 0.35 : f64, result_bshd} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x1x8xf32>
  %r1 = ds.reshape %h1 : (tensor<1x4x1x8xf32>) -> tensor<1x4x8xf32>
  %bias = ds.parameter "bias" = dense<1.0> : tensor<8xf32>
  %y = ds.add %r1, %bias : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}
