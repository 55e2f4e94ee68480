// ds-build-train-step with optimizer type Muon (DeepSpeed's MuonWithAuxAdam):
// matrices whose names lack "embed" and "lm_head" get ds.muon_update with a
// momentum buffer and the [out, in] aspect scale (a matmul's right operand
// is [in, out]: 2x6 scales by sqrt(6 / 2)); biases and embeddings get Adam;
// @optimizer_step takes Muon's own rate.
// RUN: echo '{"train_batch_size": 4, "optimizer": {"type": "Muon", "params": {"weight_decay": 0.1}}}' > %t.json
// RUN: ds-opt %s --ds-build-train-step="config=%t.json loss=mse" | FileCheck %s

// CHECK-DAG: ml_program.global private mutable @"momentum:w1" : tensor<3x2xf32>
// CHECK-DAG: ml_program.global private mutable @"momentum:w2" : tensor<2x6xf32>
// CHECK-DAG: ml_program.global private mutable @"adam_m:b2" : tensor<6xf32>
// CHECK-DAG: ml_program.global private mutable @"adam_m:embed.weight" : tensor<5x3xf32>
// CHECK-NOT: @"momentum:b2"
// CHECK-NOT: @"momentum:embed.weight"
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: {ds.name = "bias2_sqrt"}, %[[MLR:.+]]: tensor<f32> {ds.name = "muon_lr"})
// CHECK-DAG: ds.adam_update {{.+}}beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, decoupled = true, eps = 1.000000e-10 : f64
// CHECK-DAG: ds.muon_update %{{.+}}, %{{.+}}, %{{.+}}, %[[MLR]], %{{.+}} found_inf %{{.+}} {momentum = 0.94999999999999996 : f64, nesterov = true, ns_steps = 5 : i64, scale = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<3x2xf32>
// CHECK-DAG: ds.muon_update {{.+}}scale = 1.7320508075688772 : f64{{.+}} : (tensor<2x6xf32>
func.func @main(%idx: tensor<4xi64> {ds.name = "idx"}) -> (tensor<4x6xf32> {ds.name = "y"}) {
  %e = ds.parameter "embed.weight" = dense<[[0.1, -0.2, 0.3], [0.3, 0.4, -0.1], [-0.5, 0.6, 0.2], [0.7, -0.1, 0.5], [0.2, 0.9, -0.4]]> : tensor<5x3xf32>
  %w1 = ds.parameter "w1" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %w2 = ds.parameter "w2" = dense<[[0.1, -0.2, 0.3, 0.5, -0.7, 0.2], [0.3, 0.4, -0.6, 0.1, 0.8, -0.3]]> : tensor<2x6xf32>
  %b2 = ds.parameter "b2" = dense<[0.1, -0.2, 0.3, 0.4, -0.5, 0.6]> : tensor<6xf32>
  %x = ds.gather %e, %idx {axis = 0 : i64} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  %h = ds.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %y = ds.matmul %h, %w2 : (tensor<4x2xf32>, tensor<2x6xf32>) -> tensor<4x6xf32>
  %z = ds.add %y, %b2 : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %z : tensor<4x6xf32>
}
