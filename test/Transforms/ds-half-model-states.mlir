// ds-half-model-states: bf16 training keeps a 16-bit working copy of each
// parameter (read widened, or as it is by products), 16-bit gradient
// accumulators, and fp32 master weights the optimizer updates and rounds
// back into the copy; export bindings name the masters. fp32 modules and
// grad_accum_dtype = fp32 accumulators are left alone.
// RUN: ds-opt %s -split-input-file --ds-half-model-states | FileCheck %s

// CHECK-LABEL: module attributes
// CHECK-SAME: state = "master:w"
// CHECK-DAG: ml_program.global private mutable @"grad:w" : tensor<2x2xbf16>
// CHECK-DAG: ml_program.global private mutable @"param:w"(dense<{{.*}}> : tensor<2x2xbf16>) : tensor<2x2xbf16>
// CHECK-DAG: ml_program.global private mutable @"master:w"(dense<{{\[\[}}1.000000e-01, 2.000000e-01], [3.000000e-01, 4.000000e-01]]> : tensor<2x2xf32>) : tensor<2x2xf32>
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.+]] = ml_program.global_load @"param:w" : tensor<2x2xbf16>
// CHECK: %[[PW:.+]] = ds.cast %[[P]] : tensor<2x2xbf16> -> tensor<2x2xf32>
// CHECK: ds.matmul %arg0, %[[PW]]
// CHECK: %[[G:.+]] = ml_program.global_load @"grad:w" : tensor<2x2xbf16>
// CHECK: %[[GW:.+]] = ds.cast %[[G]] : tensor<2x2xbf16> -> tensor<2x2xf32>
// CHECK: %[[S:.+]] = ds.add %[[GW]], %{{.+}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: %[[SN:.+]] = ds.cast %[[S]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK: ml_program.global_store @"grad:w" = %[[SN]] : tensor<2x2xbf16>
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[OG:.+]] = ml_program.global_load @"grad:w" : tensor<2x2xbf16>
// CHECK: %[[OGW:.+]] = ds.cast %[[OG]] : tensor<2x2xbf16> -> tensor<2x2xf32>
// CHECK: %[[M:.+]] = ml_program.global_load @"master:w" : tensor<2x2xf32>
// CHECK: %[[NP:.+]], %{{.+}}, %{{.+}} = ds.adam_update %[[M]], %[[OGW]]
// CHECK: ml_program.global_store @"master:w" = %[[NP]] : tensor<2x2xf32>
// CHECK: %[[NC:.+]] = ds.cast %[[NP]] : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK: ml_program.global_store @"param:w" = %[[NC]] : tensor<2x2xbf16>
// CHECK: %[[Z:.+]] = ds.fill 0.000000e+00 : tensor<2x2xbf16>
// CHECK: ml_program.global_store @"grad:w" = %[[Z]] : tensor<2x2xbf16>
module attributes {ds.training = {precision = "bf16", grad_accum_dtype = "bf16", export_bindings = [{initializer = "w", state = "param:w", transpose = false}]}} {
  ml_program.global private mutable @"adam_v:w" : tensor<2x2xf32>
  ml_program.global private mutable @"adam_m:w" : tensor<2x2xf32>
  ml_program.global private mutable @"grad:w" : tensor<2x2xf32>
  ml_program.global private mutable @"param:w"(dense<[[0.1, 0.2], [0.3, 0.4]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  func.func @train_step(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %p = ml_program.global_load @"param:w" : tensor<2x2xf32>
    %y = ds.matmul %x, %p : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %g = ml_program.global_load @"grad:w" : tensor<2x2xf32>
    %s = ds.add %g, %y : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    ml_program.global_store @"grad:w" = %s : tensor<2x2xf32>
    return %y : tensor<2x2xf32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %ss: tensor<f32>, %b2: tensor<f32>, %clip: tensor<f32>, %inf: tensor<f32>) {
    %g = ml_program.global_load @"grad:w" : tensor<2x2xf32>
    %p = ml_program.global_load @"param:w" : tensor<2x2xf32>
    %m = ml_program.global_load @"adam_m:w" : tensor<2x2xf32>
    %v = ml_program.global_load @"adam_v:w" : tensor<2x2xf32>
    %np, %nm, %nv = ds.adam_update %p, %g, %m, %v, %lr, %ss, %b2, %clip found_inf %inf {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, decoupled = true, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
    ml_program.global_store @"param:w" = %np : tensor<2x2xf32>
    ml_program.global_store @"adam_m:w" = %nm : tensor<2x2xf32>
    ml_program.global_store @"adam_v:w" = %nv : tensor<2x2xf32>
    %z = ds.fill 0.000000e+00 : tensor<2x2xf32>
    ml_program.global_store @"grad:w" = %z : tensor<2x2xf32>
    return
  }
}

// -----

// grad_accum_dtype fp32 keeps fp32 accumulators; the parameter still
// splits. A global the optimizer never updates is no parameter to split.
// CHECK-LABEL: module attributes
// CHECK-DAG: ml_program.global private mutable @"grad:w" : tensor<2xf32>
// CHECK-DAG: ml_program.global private mutable @"param:w"(dense<{{.*}}> : tensor<2xbf16>) : tensor<2xbf16>
// CHECK-DAG: ml_program.global private mutable @"param:k"(dense<[3.000000e+00, 4.000000e+00]> : tensor<2xf32>) : tensor<2xf32>
// CHECK-NOT: master:k
module attributes {ds.training = {precision = "bf16", grad_accum_dtype = "fp32"}} {
  ml_program.global private mutable @"grad:w" : tensor<2xf32>
  ml_program.global private mutable @"param:w"(dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  ml_program.global private mutable @"param:k"(dense<[3.0, 4.0]> : tensor<2xf32>) : tensor<2xf32>
  func.func @optimizer_step(%d: tensor<2xf32>) {
    %p = ml_program.global_load @"param:w" : tensor<2xf32>
    %n = ds.add %p, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    ml_program.global_store @"param:w" = %n : tensor<2xf32>
    return
  }
}

// -----

// fp32 training: nothing changes.
// CHECK-LABEL: module attributes
// CHECK-NOT: master:
// CHECK: ml_program.global private mutable @"param:w"(dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>) : tensor<2xf32>
module attributes {ds.training = {precision = "fp32", grad_accum_dtype = "fp32"}} {
  ml_program.global private mutable @"param:w"(dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
}
