// 1-bit Adam (optimizer type OneBitAdam): ds-build-train-step builds
// @optimizer_step (Adam without bias correction, `skip` for the init-only
// first step) and @optimizer_step_compressed (the momentum from this rank's
// own gradients, the variance frozen); ds-data-parallel averages the
// gradients of the first and, in the second, the momentum by the 1-bit
// all-reduce, its errors as state padded to a multiple of
// n * lcm(n, 8) = 32 elements at 4 ranks and the stored-transposed weight
// compressed in its initializer's layout; the ranks agree on a non-finite
// local gradient norm.
// RUN: echo '{"train_batch_size": 16, "optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 3}}}' > %t.json
// RUN: ds-opt %s --ds-build-train-step="config=%t.json loss=mse world-size=4" --ds-data-parallel=world-size=4 | FileCheck %s
// 0/1 Adam: between variance steps the gradient is 1-bit averaged; after
// var_freeze_step local steps add to an accumulator, which a sync step
// averages (1-bit, its own errors) and m is rebuilt from.
// RUN: echo '{"train_batch_size": 16, "optimizer": {"type": "ZeroOneAdam", "params": {"var_freeze_step": 3}}}' > %t.zo.json
// RUN: ds-opt %s --ds-build-train-step="config=%t.zo.json loss=mse world-size=4" --ds-data-parallel=world-size=4 | FileCheck %s --check-prefix=ZO
// OneBitLamb (1-bit Lamb), where the warm-up tracks the frozen trust ratio; after freeze_step
// every scaled momentum joins one buffer (the initializers' order and
// layouts: W transposed back, then b) for one 1-bit all-reduce.
// RUN: echo '{"train_batch_size": 16, "optimizer": {"type": "OneBitLamb", "params": {"freeze_step": 3, "weight_decay": 0.01}}}' > %t.lamb.json
// RUN: ds-opt %s --ds-build-train-step="config=%t.lamb.json loss=mse world-size=4" --ds-data-parallel=world-size=4 | FileCheck %s --check-prefix=LAMB

// CHECK-DAG: ml_program.global private mutable @"onebit_worker_error:w" : tensor<32xf32>
// CHECK-DAG: ml_program.global private mutable @"onebit_server_error:w" : tensor<8xf32>
// CHECK-DAG: ml_program.global private mutable @"onebit_worker_error:b" : tensor<32xf32>
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: {ds.name = "skip"})
// CHECK: ds.all_reduce
// CHECK: ds.adam_update
// CHECK-NOT: compressed_all_reduce
// CHECK-LABEL: func.func @optimizer_step_compressed(
// CHECK-SAME: {ds.name = "lr"}) -> (tensor<f32> {ds.name = "grad_norm"})
// CHECK-NOT: ds.all_reduce %{{.*}}grad
// CHECK: %[[T:.+]] = ds.transpose %[[M:.+]] {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK: %[[AVG:.+]], %[[WE:.+]], %[[SE:.+]] = ds.compressed_all_reduce %[[T]], %{{.+}}, %{{.+}} {axes = ["dp"]} : (tensor<2x3xf32>, tensor<32xf32>, tensor<8xf32>)
// CHECK: %[[BACK:.+]] = ds.transpose %[[AVG]]
// CHECK: ml_program.global_store @"onebit_worker_error:w" = %[[WE]]
// CHECK: ml_program.global_store @"onebit_server_error:w" = %[[SE]]
// CHECK: ml_program.global_store @"adam_m:w" = %[[BACK]]
// CHECK: %[[BAD:.+]] = ds.all_reduce %{{.+}} {axes = ["dp"]} : tensor<f32>
// CHECK: ds.greater %[[BAD]]
// CHECK: ds.where
// ZO-DAG: ml_program.global private mutable @"onebit_accumulator:w" : tensor<3x2xf32>
// ZO-DAG: ml_program.global private mutable @"onebit_worker_error:acc:w" : tensor<32xf32>
// ZO-LABEL: func.func @optimizer_step(
// ZO-SAME: {ds.name = "skip"})
// ZO-LABEL: func.func @optimizer_step_onebit_grad(
// ZO: %[[G:.+]] = ds.transpose %{{.+}} {permutation = array<i64: 1, 0>}
// ZO: ds.compressed_all_reduce %[[G]], %onebit_worker_error3Aw,
// ZO: ml_program.global_store @"adam_m:w"
// ZO-NOT: onebit_accumulator
// ZO-LABEL: func.func @optimizer_step_local(
// ZO-NOT: compressed_all_reduce
// ZO: ml_program.global_store @"onebit_accumulator:w"
// ZO-LABEL: func.func @optimizer_step_sync(
// ZO-SAME: {ds.name = "lrs"})
// ZO: ds.compressed_all_reduce %{{.+}}, %onebit_worker_error3Aacc3Aw,
// ZO: ds.neg
// ZO: ds.fill 0.000000e+00
// ZO: ml_program.global_store @"onebit_accumulator:w"
// ZO: ml_program.global_store @"adam_m:w"
// LAMB-DAG: ml_program.global private mutable @"onebit_last_factor:w"(dense<1.000000e+00> : tensor<f32>) : tensor<f32>
// LAMB-DAG: ml_program.global private mutable @"onebit_lamb_coeff:w" : tensor<f32>
// LAMB-DAG: ml_program.global private mutable @"onebit_worker_error:lamb_momenta" : tensor<32xf32>
// LAMB-LABEL: func.func @optimizer_step(
// LAMB-SAME: {ds.name = "skip"}, %{{.+}}: tensor<f32> {ds.name = "fresh"})
// LAMB: ml_program.global_store @"onebit_lamb_coeff:w"
// LAMB-LABEL: func.func @optimizer_step_lamb_compressed(
// LAMB-SAME: {ds.name = "first"})
// LAMB: %[[W:.+]] = ds.reshape %{{.+}} : (tensor<2x3xf32>) -> tensor<6xf32>
// LAMB: %[[ALL:.+]] = ds.concat %[[W]], %{{.+}} {axis = 0 : i64} : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
// LAMB: %[[AVG:.+]], %{{.+}}, %{{.+}} = ds.compressed_all_reduce %[[ALL]], %onebit_worker_error3Alamb_momenta
// LAMB: ds.slice %[[AVG]] {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<6xf32>
// LAMB: ds.reduce_max
// LAMB: ml_program.global_store @"onebit_last_factor:w"
// LAMB: ds.slice %[[AVG]] {starts = array<i64: 6>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<2xf32>
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x2xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32> {ds.transpose_of = "W"}
  %b = ds.parameter "b" = dense<[0.1, -0.2]> : tensor<2xf32>
  %0 = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %1 = ds.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}
