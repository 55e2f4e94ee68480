// ds-derive-generation: from a causal LM's forward over whole sequences (M
// tokens), a prefill program over chunks of T tokens and a one-token decode
// program that share per-layer KV caches.
// RUN: ds-opt %s --ds-derive-generation=chunk=4 -split-input-file -verify-diagnostics | FileCheck %s

// A one-layer GPT over M = 8 tokens, batch 2: position embeddings [1, M, D]
// added to the token embeddings, grouped-query attention (2 query heads, 1
// key/value head) with a causal mask, the LM head after a norm.
// CHECK-DAG: ml_program.global private mutable @kv.0.key(dense<0.000000e+00> : tensor<2x1x1x4x16xf32>)
// CHECK-DAG: ml_program.global private mutable @kv.0.value(dense<0.000000e+00> : tensor<2x1x16x4xf32>)
// CHECK-NOT: func.func @main
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x4xi64> {ds.name = "input_ids"}, %[[POSI:.+]]: tensor<2xi64> {ds.name = "positions"}, %[[LEN:.+]]: tensor<2xi64> {ds.name = "lengths"}, %[[SLOT:.+]]: tensor<2xi64> {ds.name = "slots"}) -> (tensor<2x16xf32> {ds.name = "logits"})
// Each row's positions: positions[b] + t, held inside the cache.
// CHECK: %[[COL:.+]] = ds.reshape %[[POSI]] : (tensor<2xi64>) -> tensor<2x1xi64>
// CHECK: %[[SUM:.+]] = ds.add %[[COL]], %{{.+}} : (tensor<2x1xi64>, tensor<1x4xi64>) -> tensor<2x4xi64>
// CHECK: %[[IDX:.+]] = ds.min %[[SUM]]
// The position embedding's rows at those positions.
// CHECK: %[[X:.+]] = ds.gather %{{.+}}, %[[IDS]] {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK: %[[ROWS:.+]] = ds.gather %{{.+}}, %[[IDX]] {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK: %[[H:.+]] = ds.add %[[X]], %[[ROWS]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[Q:.+]] = ds.matmul %[[H]], %{{.+}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[K:.+]] = ds.matmul %[[H]], %{{.+}} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[V:.+]] = ds.matmul %[[H]], %{{.+}} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[KC:.+]] = ml_program.global_load @kv.0.key : tensor<2x1x1x4x16xf32>
// CHECK: %[[VC:.+]] = ml_program.global_load @kv.0.value : tensor<2x1x16x4xf32>
// The strides into the chunk's q, k and v: the sequence steps as before,
// the batch by the chunk's rows.
// CHECK: %[[A:.+]], %[[KO:.+]], %[[VO:.+]] = ds.cached_attention %[[Q]], %[[K]], %[[V]], %[[KC]], %[[VC]], %[[POSI]], %[[LEN]], %[[SLOT]]
// CHECK-SAME: key_shape = array<i64: 2, 1, 4, 4>, key_strides = array<i64: 16, 0, 4, 1>
// CHECK-SAME: query_shape = array<i64: 2, 2, 4, 4>, query_strides = array<i64: 32, 4, 8, 1>
// CHECK-SAME: result_bshd
// CHECK-SAME: scale = 5.000000e-01 : f64
// CHECK-NOT: window
// CHECK-SAME: -> (tensor<2x4x2x4xf32>, tensor<2x1x1x4x16xf32>, tensor<2x1x16x4xf32>)
// CHECK: ml_program.global_store @kv.0.key = %[[KO]]
// CHECK: ml_program.global_store @kv.0.value = %[[VO]]
// CHECK: %[[RES:.+]] = ds.add %[[H]], %{{.+}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// The LM head reads each row's last real token only: row b * 4 + max(length - 1, 0).
// CHECK: %[[LAST:.+]] = ds.max
// CHECK: %[[PICK:.+]] = ds.add %{{.+}}, %[[LAST]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[FLAT:.+]] = ds.reshape %[[RES]] : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[ONE:.+]] = ds.gather %[[FLAT]], %[[PICK]] {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: %[[BACK:.+]] = ds.reshape %[[ONE]] : (tensor<2x8xf32>) -> tensor<2x1x8xf32>
// CHECK: %[[N:.+]] = ds.rms_norm %[[BACK]] {{.+}} : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
// CHECK: %[[L:.+]] = ds.matmul %[[N]], %{{.+}} : (tensor<2x1x8xf32>, tensor<8x16xf32>) -> tensor<2x1x16xf32>
// CHECK: %[[OUT:.+]] = ds.reshape %[[L]] : (tensor<2x1x16xf32>) -> tensor<2x16xf32>
// CHECK: return %[[OUT]]
// One token per row, the same caches; no rows to pick.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.+}}: tensor<2x1xi64> {ds.name = "input_ids"}, %{{.+}}: tensor<2xi64> {ds.name = "positions"}, %{{.+}}: tensor<2xi64> {ds.name = "lengths"}, %{{.+}}: tensor<2xi64> {ds.name = "slots"}) -> (tensor<2x16xf32> {ds.name = "logits"})
// CHECK: ds.gather %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
// CHECK: ds.cached_attention
// CHECK-SAME: query_shape = array<i64: 2, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>
// CHECK-SAME: -> (tensor<2x1x2x4xf32>, tensor<2x1x1x4x16xf32>, tensor<2x1x16x4xf32>)
// CHECK: ml_program.global_store @kv.0.key
// CHECK-NOT: ds.gather
// CHECK: ds.matmul %{{.+}}, %{{.+}} : (tensor<2x1x8xf32>, tensor<8x16xf32>) -> tensor<2x1x16xf32>
module attributes {ds.test} {
  func.func @main(%ids: tensor<2x8xi64> {ds.name = "input_ids"}) -> (tensor<2x8x16xf32> {ds.name = "logits"}) {
    %emb = ds.parameter "emb" = dense<0.5> : tensor<16x8xf32>
    %pos = ds.constant dense<[[[0.00,0.01,0.02,0.03,0.04,0.05,0.06,0.07],[0.08,0.09,0.10,0.11,0.12,0.13,0.14,0.15],[0.16,0.17,0.18,0.19,0.20,0.21,0.22,0.23],[0.24,0.25,0.26,0.27,0.28,0.29,0.30,0.31],[0.32,0.33,0.34,0.35,0.36,0.37,0.38,0.39],[0.40,0.41,0.42,0.43,0.44,0.45,0.46,0.47],[0.48,0.49,0.50,0.51,0.52,0.53,0.54,0.55],[0.56,0.57,0.58,0.59,0.60,0.61,0.62,0.63]]]> : tensor<1x8x8xf32>
    %wq = ds.parameter "wq" = dense<0.1> : tensor<8x8xf32>
    %wk = ds.parameter "wk" = dense<0.2> : tensor<8x4xf32>
    %wv = ds.parameter "wv" = dense<0.3> : tensor<8x4xf32>
    %wo = ds.parameter "wo" = dense<0.4> : tensor<8x8xf32>
    %head = ds.parameter "head" = dense<0.6> : tensor<8x16xf32>
    %mask = ds.constant dense<[[[[false,true,true,true,true,true,true,true],[false,false,true,true,true,true,true,true],[false,false,false,true,true,true,true,true],[false,false,false,false,true,true,true,true],[false,false,false,false,false,true,true,true],[false,false,false,false,false,false,true,true],[false,false,false,false,false,false,false,true],[false,false,false,false,false,false,false,false]]]]> : tensor<1x1x8x8xi1>
    %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x8xi64>) -> tensor<2x8x8xf32>
    %h = ds.add %x, %pos : (tensor<2x8x8xf32>, tensor<1x8x8xf32>) -> tensor<2x8x8xf32>
    %q = ds.matmul %h, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %k = ds.matmul %h, %wk : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
    %v = ds.matmul %h, %wv : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
    %a = ds.attention %q, %k, %v mask %mask {mask_fill = 0xFFF0000000000000 : f64,
        query_shape = array<i64: 2, 2, 8, 4>, query_strides = array<i64: 64, 4, 8, 1>,
        key_shape = array<i64: 2, 1, 8, 4>, key_strides = array<i64: 32, 4, 4, 1>,
        value_shape = array<i64: 2, 1, 8, 4>, value_strides = array<i64: 32, 4, 4, 1>,
        scale = 0.5 : f64, result_bshd}
        : (tensor<2x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<1x1x8x8xi1>) -> tensor<2x8x2x4xf32>
    %r = ds.reshape %a : (tensor<2x8x2x4xf32>) -> tensor<2x8x8xf32>
    %o = ds.matmul %r, %wo : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %res = ds.add %h, %o : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %n = ds.rms_norm %res {epsilon = 1.0e-06 : f32} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %logits = ds.matmul %n, %head : (tensor<2x8x8xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
    return %logits : tensor<2x8x16xf32>
  }
}

// -----

// One tensor-parallel rank's program (ds-global-to-local ran first): each
// row-parallel product's partial sums go through ds.all_reduce, which
// works token by token; the last row is picked before the last one.
// CHECK-LABEL: func.func @prefill
// CHECK: ds.cached_attention
// CHECK: ds.all_reduce %{{.+}} {axes = ["tp"]} : tensor<2x4x8xf32>
// CHECK: ds.gather %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: ds.all_reduce %{{.+}} {axes = ["tp"]} : tensor<2x1x8xf32>
// CHECK-LABEL: func.func @decode
// CHECK: ds.all_reduce %{{.+}} {axes = ["tp"]} : tensor<2x1x8xf32>
// CHECK: ds.all_reduce %{{.+}} {axes = ["tp"]} : tensor<2x1x8xf32>
module attributes {ds.test, ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  func.func @main(%ids: tensor<2x8xi64> {ds.name = "input_ids"}) -> (tensor<2x8x16xf32> {ds.name = "logits"}) attributes {ds.spmd} {
    %emb = ds.parameter "emb" = dense<0.5> : tensor<16x8xf32>
    %pos = ds.constant dense<[[[0.00,0.01,0.02,0.03,0.04,0.05,0.06,0.07],[0.08,0.09,0.10,0.11,0.12,0.13,0.14,0.15],[0.16,0.17,0.18,0.19,0.20,0.21,0.22,0.23],[0.24,0.25,0.26,0.27,0.28,0.29,0.30,0.31],[0.32,0.33,0.34,0.35,0.36,0.37,0.38,0.39],[0.40,0.41,0.42,0.43,0.44,0.45,0.46,0.47],[0.48,0.49,0.50,0.51,0.52,0.53,0.54,0.55],[0.56,0.57,0.58,0.59,0.60,0.61,0.62,0.63]]]> : tensor<1x8x8xf32>
    %wq = ds.parameter "wq" = dense<0.1> : tensor<8x8xf32>
    %wk = ds.parameter "wk" = dense<0.2> : tensor<8x4xf32>
    %wv = ds.parameter "wv" = dense<0.3> : tensor<8x4xf32>
    %wo = ds.parameter "wo" = dense<0.4> : tensor<8x8xf32>
    %head = ds.parameter "head" = dense<0.6> : tensor<8x16xf32>
    %mask = ds.constant dense<[[[[false,true,true,true,true,true,true,true],[false,false,true,true,true,true,true,true],[false,false,false,true,true,true,true,true],[false,false,false,false,true,true,true,true],[false,false,false,false,false,true,true,true],[false,false,false,false,false,false,true,true],[false,false,false,false,false,false,false,true],[false,false,false,false,false,false,false,false]]]]> : tensor<1x1x8x8xi1>
    %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x8xi64>) -> tensor<2x8x8xf32>
    %h = ds.add %x, %pos : (tensor<2x8x8xf32>, tensor<1x8x8xf32>) -> tensor<2x8x8xf32>
    %q = ds.matmul %h, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %k = ds.matmul %h, %wk : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
    %v = ds.matmul %h, %wv : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
    %a = ds.attention %q, %k, %v mask %mask {mask_fill = 0xFFF0000000000000 : f64,
        query_shape = array<i64: 2, 2, 8, 4>, query_strides = array<i64: 64, 4, 8, 1>,
        key_shape = array<i64: 2, 1, 8, 4>, key_strides = array<i64: 32, 4, 4, 1>,
        value_shape = array<i64: 2, 1, 8, 4>, value_strides = array<i64: 32, 4, 4, 1>,
        scale = 0.5 : f64, result_bshd}
        : (tensor<2x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<1x1x8x8xi1>) -> tensor<2x8x2x4xf32>
    %r = ds.reshape %a : (tensor<2x8x2x4xf32>) -> tensor<2x8x8xf32>
    %o = ds.matmul %r, %wo : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %sum = ds.all_reduce %o {axes = ["tp"]} : tensor<2x8x8xf32>
    %res = ds.add %h, %sum : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %n0 = ds.rms_norm %res {epsilon = 1.0e-06 : f32} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %p = ds.matmul %n0, %wo : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
    %psum = ds.all_reduce %p {axes = ["tp"]} : tensor<2x8x8xf32>
    %n = ds.rms_norm %psum {epsilon = 1.0e-06 : f32} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %logits = ds.matmul %n, %head : (tensor<2x8x8xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
    return %logits : tensor<2x8x16xf32>
  }
}

// -----

// A mask that lets every query see every key (an encoder): not causal.
func.func @main(%ids: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = ds.parameter "emb" = dense<0.5> : tensor<8x8xf32>
  %mask = ds.constant dense<0.0> : tensor<1x1x4x4xf32>
  %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  // expected-error @+1 {{cannot derive a generation step: the attention mask is not causal (query 0 sees key 1)}}
  %a = ds.attention %x, %x, %x mask %mask {
      query_shape = array<i64: 1, 1, 4, 8>, query_strides = array<i64: 32, 8, 8, 1>,
      key_shape = array<i64: 1, 1, 4, 8>, key_strides = array<i64: 32, 8, 8, 1>,
      value_shape = array<i64: 1, 1, 4, 8>, value_strides = array<i64: 32, 8, 8, 1>,
      scale = 0.5 : f64, result_bshd}
      : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x1x8xf32>
  %r = ds.reshape %a : (tensor<1x4x1x8xf32>) -> tensor<1x4x8xf32>
  return %r : tensor<1x4x8xf32>
}

// -----

// A bias added to the scores where the mask keeps them (ALiBi-like).
func.func @main(%ids: tensor<1x2xi64>) -> tensor<1x2x8xf32> {
  %emb = ds.parameter "emb" = dense<0.5> : tensor<8x8xf32>
  %mask = ds.constant dense<[[[[0.0, -3.0e38], [-1.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<1x2xi64>) -> tensor<1x2x8xf32>
  // expected-error @+1 {{an attention mask that adds a bias to the scores (-1.000000e+00 at query 1, key 0) is not supported for generation}}
  %a = ds.attention %x, %x, %x mask %mask {
      query_shape = array<i64: 1, 1, 2, 8>, query_strides = array<i64: 16, 8, 8, 1>,
      key_shape = array<i64: 1, 1, 2, 8>, key_strides = array<i64: 16, 8, 8, 1>,
      value_shape = array<i64: 1, 1, 2, 8>, value_strides = array<i64: 16, 8, 8, 1>,
      scale = 0.5 : f64, result_bshd}
      : (tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x1x8xf32>
  %r = ds.reshape %a : (tensor<1x2x1x8xf32>) -> tensor<1x2x8xf32>
  return %r : tensor<1x2x8xf32>
}

// -----

// A cumulative sum along the sequence mixes positions.
func.func @main(%ids: tensor<1x4xi64>) -> tensor<1x4x8xf32> {
  %emb = ds.parameter "emb" = dense<0.5> : tensor<8x8xf32>
  %x = ds.gather %emb, %ids {axis = 0 : i64} : (tensor<8x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  // expected-error @+1 {{cannot derive a generation step: 'ds.cumsum' accumulates along the sequence}}
  %c = ds.cumsum %x {axis = 1 : i64} : tensor<1x4x8xf32>
  return %c : tensor<1x4x8xf32>
}

// -----

// A model with two inputs: generation feeds token ids only.
// expected-error @+1 {{generation needs a model whose only input is the token ids [batch, sequence]; this one has 2 inputs}}
func.func @main(%ids: tensor<1x4xi64>, %other: tensor<1x4xf32>) -> tensor<1x4xf32> {
  return %other : tensor<1x4xf32>
}
