// ds-build-train-step: parameters become globals, @train_step adds the loss,
// its gradients (stored into grad: globals, or with gradient accumulation
// added to them, seeded with 1/gas) and @optimizer_step the clipped fused
// update and the gradient reset.
// RUN: ds-opt %s --ds-build-train-step -split-input-file | FileCheck %s
// RUN: echo '{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}' > %t.json
// RUN: ds-opt %s --ds-build-train-step="config=%t.json" -split-input-file | FileCheck %s --check-prefix=GAS
// RUN: ds-opt %s --ds-build-train-step="loss=mse" -split-input-file | FileCheck %s --check-prefix=MSE
// RUN: not ds-opt %s --ds-build-train-step="loss=hinge" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADLOSS
// RUN: not ds-opt %s --ds-build-train-step="freeze=nope" -split-input-file 2>&1 | FileCheck %s --check-prefix=FREEZE

// CHECK-DAG: ml_program.global private mutable @"param:w"(dense<{{.*}}> : tensor<3x2xf32>) : tensor<3x2xf32>
// CHECK-DAG: ml_program.global private mutable @"grad:w" : tensor<3x2xf32>
// CHECK-DAG: ml_program.global private mutable @"adam_m:w" : tensor<3x2xf32>
// CHECK-DAG: ml_program.global private mutable @"adam_v:w" : tensor<3x2xf32>
// The mask is a buffer: no gradient reaches it, so no optimizer state.
// CHECK-NOT: @"grad:mask"
// CHECK-LABEL: func.func @main
// CHECK: ml_program.global_load @"param:w"
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {ds.name = "x"}, %[[L:.+]]: tensor<4xi64> {ds.name = "labels"}) -> (tensor<f32> {ds.name = "loss"})
// CHECK: %[[LOSS:.+]] = ds.softmax_cross_entropy %{{.+}}, %[[L]]
// CHECK: %[[SEED:.+]] = ds.constant dense<1.000000e+00> : tensor<f32>
// CHECK: ds.softmax_cross_entropy_grad %{{.+}}, %[[L]], %[[SEED]]
// One micro-step per optimizer step: the gradient is stored as it is (its
// GEMM writes it rather than reading the zeroed accumulator back).
// CHECK-NOT: ml_program.global_load @"grad:w"
// CHECK: ml_program.global_store @"grad:w" = %{{.+}}
// CHECK: return %[[LOSS]]
// With two micro-steps it is added to the accumulator, seeded with 1/2.
// GAS-LABEL: func.func @train_step
// GAS: %[[SEED:.+]] = ds.constant dense<5.000000e-01> : tensor<f32>
// GAS: %[[ACC:.+]] = ml_program.global_load @"grad:w"
// GAS: %[[SUM:.+]] = ds.add %[[ACC]], %{{.+}}
// GAS: ml_program.global_store @"grad:w" = %[[SUM]]
// GAS-LABEL: func.func @optimizer_step
// GAS: %[[Z:.+]] = ds.fill 0.000000e+00 : tensor<3x2xf32>
// GAS: ml_program.global_store @"grad:w" = %[[Z]]
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: {ds.name = "lr"}, %{{.+}}: tensor<f32> {ds.name = "step_size"}, %{{.+}}: tensor<f32> {ds.name = "bias2_sqrt"}) -> (tensor<f32> {ds.name = "grad_norm"})
// CHECK: %[[NORM:.+]] = ds.sqrt {{.*}}{ds.grad_norm}
// CHECK: ds.div
// CHECK: %[[SCALE:.+]] = ds.min
// An inf or NaN gradient (a non-finite norm) leaves parameters and state as they were.
// CHECK: %[[NAN:.+]] = ds.is_nan %[[NORM]]
// CHECK: %[[INF:.+]] = ds.is_inf %[[NORM]]
// CHECK: %[[BAD:.+]] = ds.or %[[NAN]], %[[INF]]
// CHECK: %[[FOUND:.+]] = ds.cast %[[BAD]] : tensor<i1> -> tensor<f32>
// CHECK: ds.adam_update {{.+}}, %[[SCALE]] found_inf %[[FOUND]] {beta1 = 9.000000e-01 : f64, {{.+}}decoupled = true
// CHECK: ml_program.global_store @"param:w"
// The next micro-step overwrites the gradient: no reset (with accumulation
// there is one, above).
// CHECK-NOT: ds.fill
// CHECK-NOT: ml_program.global_store @"grad:w"
// CHECK: return %[[NORM]]
// MSE-LABEL: func.func @train_step
// MSE-SAME: %{{.+}}: tensor<4x2xf32> {ds.name = "labels"}
// MSE: ds.sub
// The loss op is marked where the forward ends (wall_clock_breakdown).
// MSE: ds.reduce_mean %{{.+}} {axes = array<i64: 0, 1>, ds.loss, keepdims = false}
// BADLOSS: unknown loss 'hinge' (softmax-cross-entropy, mse or graph)
// FREEZE: --freeze names 'nope', which is not a parameter
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x2xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %mask = ds.parameter "mask" = dense<1.0> : tensor<4x2xf32>
  %0 = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.greater %mask, %zero : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xi1>
  %1 = ds.where %m, %0, %zero : (tensor<4x2xi1>, tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}
