// ds-fuse-attention: the products around a softmax, the scale, the mask and
// the layout ops that arranged q, k and v become one ds.attention reading
// the tensors in memory through strided views.
// RUN: ds-opt %s --ds-fuse-attention -split-input-file | FileCheck %s

// GPT-2 as PyTorch 2 exports it: q, k, v [B, S, H, D] views of the QKV
// projection, k^T built through a [B*H, S, D] reshape, the scale split
// over q and k, an additive mask, where(isnan(p), 0, p), the result
// transposed back to [B, S, H, D]. Every layout op goes.
// CHECK-LABEL: func.func @gpt2
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x3x8xf32>, %[[K:.+]]: tensor<2x4x3x8xf32>, %[[V:.+]]: tensor<2x4x3x8xf32>, %[[M:.+]]: tensor<2x1x4x4xf32>)
// CHECK-NOT: ds.transpose
// CHECK: %[[O:.+]] = ds.attention %[[Q]], %[[K]], %[[V]] mask %[[M]]
// CHECK-SAME: key_shape = array<i64: 2, 3, 4, 8>, key_strides = array<i64: 96, 8, 24, 1>
// CHECK-SAME: query_shape = array<i64: 2, 3, 4, 8>, query_strides = array<i64: 96, 8, 24, 1>
// CHECK-SAME: result_bshd
// CHECK-SAME: scale = 0.12499999{{[0-9]+}} : f64
// CHECK-SAME: value_shape = array<i64: 2, 3, 4, 8>, value_strides = array<i64: 96, 8, 24, 1>
// CHECK-SAME: zero_nan_rows
// CHECK-SAME: -> tensor<2x4x3x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @gpt2(%q: tensor<2x4x3x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x4x3x8xf32>,
                %mask: tensor<2x1x4x4xf32>) -> tensor<2x4x3x8xf32> {
  %c = ds.constant dense<0.353553385> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %qt = ds.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xf32>
  %kt0 = ds.transpose %k {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xf32>
  %kr = ds.reshape %kt0 : (tensor<2x3x4x8xf32>) -> tensor<6x4x8xf32>
  %krt = ds.transpose %kr {permutation = array<i64: 0, 2, 1>} : (tensor<6x4x8xf32>) -> tensor<6x8x4xf32>
  %kT = ds.reshape %krt : (tensor<6x8x4xf32>) -> tensor<2x3x8x4xf32>
  %vt = ds.transpose %v {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xf32>
  %qs = ds.mul %qt, %c : (tensor<2x3x4x8xf32>, tensor<f32>) -> tensor<2x3x4x8xf32>
  %ks = ds.mul %kT, %c : (tensor<2x3x8x4xf32>, tensor<f32>) -> tensor<2x3x8x4xf32>
  %s = ds.matmul %qs, %ks : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %sm = ds.add %s, %mask : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p = ds.softmax %sm {axis = 3 : i64} : tensor<2x3x4x4xf32>
  %n = ds.is_nan %p : tensor<2x3x4x4xf32> -> tensor<2x3x4x4xi1>
  %pz = ds.where %n, %zero, %p : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %o = ds.matmul %pz, %vt : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %ot = ds.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x8xf32>) -> tensor<2x4x3x8xf32>
  return %ot : tensor<2x4x3x8xf32>
}

// -----

// Llama's grouped-query attention: 2 key/value heads repeated for 4 query
// heads by unsqueeze, expand and reshape; the scores divided by a scalar.
// The key/value views have 2 heads, each read by 2 query heads.
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: ds.expand
// CHECK: %[[O:.+]] = ds.attention %arg0, %arg1, %arg2
// CHECK-SAME: key_shape = array<i64: 1, 2, 5, 8>, key_strides = array<i64: 0, 40, 8, 1>
// CHECK-SAME: scale = 2.500000e-01 : f64
// CHECK-SAME: value_shape = array<i64: 1, 2, 5, 8>
// CHECK-SAME: -> tensor<1x4x5x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @gqa(%q: tensor<1x4x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x4x5x8xf32> {
  %four = ds.constant dense<4.0> : tensor<f32>
  %k5 = ds.reshape %k : (tensor<1x2x5x8xf32>) -> tensor<1x2x1x5x8xf32>
  %ke = ds.expand %k5 : (tensor<1x2x1x5x8xf32>) -> tensor<1x2x2x5x8xf32>
  %kf = ds.reshape %ke : (tensor<1x2x2x5x8xf32>) -> tensor<1x4x5x8xf32>
  %v5 = ds.reshape %v : (tensor<1x2x5x8xf32>) -> tensor<1x2x1x5x8xf32>
  %ve = ds.expand %v5 : (tensor<1x2x1x5x8xf32>) -> tensor<1x2x2x5x8xf32>
  %vf = ds.reshape %ve : (tensor<1x2x2x5x8xf32>) -> tensor<1x4x5x8xf32>
  %kT = ds.transpose %kf {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x4x5x8xf32>) -> tensor<1x4x8x5xf32>
  %s = ds.matmul %q, %kT : (tensor<1x4x5x8xf32>, tensor<1x4x8x5xf32>) -> tensor<1x4x5x5xf32>
  %sd = ds.div %s, %four : (tensor<1x4x5x5xf32>, tensor<f32>) -> tensor<1x4x5x5xf32>
  %p = ds.softmax %sd {axis = 3 : i64} : tensor<1x4x5x5xf32>
  %o = ds.matmul %p, %vf : (tensor<1x4x5x5xf32>, tensor<1x4x5x8xf32>) -> tensor<1x4x5x8xf32>
  return %o : tensor<1x4x5x8xf32>
}

// -----

// The same on one tensor-parallel rank of two: one key/value head repeated
// for the rank's 2 query heads. The view's head dimension is only the
// repeat (stride 0): one head in memory, read by both (a KV cache holds 1).
// CHECK-LABEL: func.func @gqa_one_kv_head
// CHECK: ds.attention %arg0, %arg1, %arg2
// CHECK-SAME: key_shape = array<i64: 1, 1, 5, 8>, key_strides = array<i64: 0, 0, 8, 1>
// CHECK-SAME: value_shape = array<i64: 1, 1, 5, 8>, value_strides = array<i64: 0, 0, 8, 1>
// CHECK-SAME: -> tensor<1x2x5x8xf32>
func.func @gqa_one_kv_head(%q: tensor<1x2x5x8xf32>, %k: tensor<1x1x5x8xf32>, %v: tensor<1x1x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %four = ds.constant dense<4.0> : tensor<f32>
  %k5 = ds.reshape %k : (tensor<1x1x5x8xf32>) -> tensor<1x1x1x5x8xf32>
  %ke = ds.expand %k5 : (tensor<1x1x1x5x8xf32>) -> tensor<1x1x2x5x8xf32>
  %kf = ds.reshape %ke : (tensor<1x1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  %v5 = ds.reshape %v : (tensor<1x1x5x8xf32>) -> tensor<1x1x1x5x8xf32>
  %ve = ds.expand %v5 : (tensor<1x1x1x5x8xf32>) -> tensor<1x1x2x5x8xf32>
  %vf = ds.reshape %ve : (tensor<1x1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  %kT = ds.transpose %kf {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x5x8xf32>) -> tensor<1x2x8x5xf32>
  %s = ds.matmul %q, %kT : (tensor<1x2x5x8xf32>, tensor<1x2x8x5xf32>) -> tensor<1x2x5x5xf32>
  %sd = ds.div %s, %four : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %p = ds.softmax %sd {axis = 3 : i64} : tensor<1x2x5x5xf32>
  %o = ds.matmul %p, %vf : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Multi-query attention as Falcon exports it: one key/value head that the
// products broadcast over 4 query heads and a batch of 1 over 2.
// CHECK-LABEL: func.func @mqa
// CHECK: ds.attention %arg0, %arg1, %arg2
// CHECK-SAME: key_shape = array<i64: 2, 1, 5, 8>, key_strides = array<i64: 0, 0, 1, 5>
// CHECK-SAME: value_shape = array<i64: 2, 1, 5, 8>, value_strides = array<i64: 0, 0, 8, 1>
func.func @mqa(%q: tensor<2x4x5x8xf32>, %kT: tensor<1x1x8x5xf32>, %v: tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32> {
  %s = ds.matmul %q, %kT : (tensor<2x4x5x8xf32>, tensor<1x1x8x5xf32>) -> tensor<2x4x5x5xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<2x4x5x5xf32>
  %o = ds.matmul %p, %v : (tensor<2x4x5x5xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  return %o : tensor<2x4x5x8xf32>
}

// -----

// Kept: the probabilities are also returned (a training forward keeps them
// for the backward), and a softmax over another axis.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: ds.attention
// CHECK: ds.softmax
// CHECK: ds.softmax
func.func @kept(%q: tensor<1x2x4x8xf32>, %kT: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) {
  %s = ds.matmul %q, %kT : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = ds.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %s2 = ds.matmul %q, %kT : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = ds.softmax %s2 {axis = 2 : i64} : tensor<1x2x4x4xf32>
  %o2 = ds.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %p, %o2 : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>
}

// -----

// GPT-2's one QKV projection [B, S, 3*H*D] cut apart by a split: the
// attention reads q, k and v in the projection's result, at offsets 0,
// H*D and 2*H*D, and the split goes.
// CHECK-LABEL: func.func @qkv_split
// CHECK-SAME: (%[[QKV:.+]]: tensor<2x4x48xf32>)
// CHECK-NOT: ds.split
// CHECK: %[[O:.+]] = ds.attention %[[QKV]], %[[QKV]], %[[QKV]]
// CHECK-SAME: key_offset = 16 : i64, key_shape = array<i64: 2, 2, 4, 8>, key_strides = array<i64: 192, 8, 48, 1>
// CHECK-NOT: query_offset
// CHECK-SAME: query_shape = array<i64: 2, 2, 4, 8>, query_strides = array<i64: 192, 8, 48, 1>
// CHECK-SAME: value_offset = 32 : i64, value_shape = array<i64: 2, 2, 4, 8>, value_strides = array<i64: 192, 8, 48, 1>
// CHECK-NEXT: return %[[O]]
func.func @qkv_split(%qkv: tensor<2x4x48xf32>) -> tensor<2x4x2x8xf32> {
  %p:3 = ds.split %qkv {axis = 2 : i64} : (tensor<2x4x48xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %q4 = ds.reshape %p#0 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = ds.reshape %p#1 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = ds.reshape %p#2 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q = ds.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kT = ds.transpose %k4 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x8x4xf32>
  %v = ds.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %s = ds.matmul %q, %kT : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = ds.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = ds.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = ds.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  return %ot : tensor<2x4x2x8xf32>
}

// -----

// nn.MultiheadAttention's packed projection as PyTorch 2 exports it: q, k
// and v selected from a [3, B, H, S, D] tensor by gathers of one constant
// index. The attention reads them in place at offsets 0, B*H*S*D and twice
// that; the gathers go.
// CHECK-LABEL: func.func @qkv_select
// CHECK-SAME: (%[[QKV:.+]]: tensor<3x2x2x4x8xf32>)
// CHECK-NOT: ds.gather
// CHECK: %[[O:.+]] = ds.attention %[[QKV]], %[[QKV]], %[[QKV]]
// CHECK-SAME: key_offset = 128 : i64, key_shape = array<i64: 2, 2, 4, 8>, key_strides = array<i64: 64, 32, 8, 1>
// CHECK-SAME: value_offset = 256 : i64
// CHECK-NEXT: return %[[O]]
func.func @qkv_select(%qkv: tensor<3x2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %i0 = ds.constant dense<0> : tensor<i64>
  %i1 = ds.constant dense<1> : tensor<i64>
  %i2 = ds.constant dense<-1> : tensor<i64>
  %q = ds.gather %qkv, %i0 {axis = 0 : i64} : (tensor<3x2x2x4x8xf32>, tensor<i64>) -> tensor<2x2x4x8xf32>
  %k = ds.gather %qkv, %i1 {axis = 0 : i64} : (tensor<3x2x2x4x8xf32>, tensor<i64>) -> tensor<2x2x4x8xf32>
  %v = ds.gather %qkv, %i2 {axis = 0 : i64} : (tensor<3x2x2x4x8xf32>, tensor<i64>) -> tensor<2x2x4x8xf32>
  %kT = ds.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = ds.matmul %q, %kT : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = ds.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// nn.MultiheadAttention's [S, B, H, D] result at batch 1 has the bytes of
// [B, S, H, D]: the attention writes that (result_bshd) and a reshape,
// which moves nothing, gives the transpose's type.
// CHECK-LABEL: func.func @seq_first_batch1
// CHECK-NOT: ds.transpose
// CHECK: %[[O:.+]] = ds.attention %arg0, %arg1, %arg2
// CHECK-SAME: result_bshd
// CHECK-SAME: -> tensor<1x4x2x8xf32>
// CHECK-NEXT: %[[R:.+]] = ds.reshape %[[O]] : (tensor<1x4x2x8xf32>) -> tensor<4x1x2x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @seq_first_batch1(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<4x1x2x8xf32> {
  %kT = ds.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = ds.matmul %q, %kT : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = ds.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %ot = ds.transpose %o {permutation = array<i64: 2, 0, 1, 3>} : (tensor<1x2x4x8xf32>) -> tensor<4x1x2x8xf32>
  return %ot : tensor<4x1x2x8xf32>
}
