// ds-tensor-parallel: the module gets a tp mesh axis; each column-parallel
// weight of a Megatron pair (here an MLP: fc1 | fc2, and attention with a
// fused QKV weight split into q, k, v) gets a ds.shard constraint. A head
// count that does not divide is an error naming the layer.
// RUN: ds-opt %s --ds-tensor-parallel=size=2 -split-input-file -verify-diagnostics | FileCheck %s

// CHECK: module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>}
// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = ds.parameter "fc1.weight" = dense<0.5> : tensor<8x16xf32>
  %b1 = ds.parameter "fc1.bias" = dense<0.1> : tensor<16xf32>
  %w2 = ds.parameter "fc2.weight" = dense<0.25> : tensor<16x8xf32>
  // CHECK: %[[S:.+]] = ds.shard %{{.+}} {sharding = #ds.sharding<{{\[\[}}], ["tp"]]>} : tensor<8x16xf32>
  // CHECK: ds.matmul %arg0, %[[S]]
  %h = ds.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %hb = ds.add %h, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = ds.relu %hb : tensor<4x16xf32>
  // The row-parallel weight is left to propagation.
  // CHECK: ds.matmul %{{.+}}, %{{.+}} : (tensor<4x16xf32>, tensor<16x8xf32>)
  // CHECK-NOT: ds.shard
  %y = ds.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A fused QKV weight split three ways becomes three weights, each split.
// CHECK-LABEL: func.func @fused_qkv
func.func @fused_qkv(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = ds.parameter "attn.qkv.weight" = dense<0.5> : tensor<8x24xf32>
  %b = ds.parameter "attn.qkv.bias" = dense<0.1> : tensor<24xf32>
  %wo = ds.parameter "attn.out.weight" = dense<0.25> : tensor<8x8xf32>
  // CHECK: ds.parameter "attn.qkv.weight#0" = dense<5.000000e-01> : tensor<8x8xf32>
  // CHECK: ds.shard
  // CHECK: ds.parameter "attn.qkv.bias#0" = dense<1.000000e-01> : tensor<8xf32>
  // CHECK: ds.parameter "attn.qkv.weight#1"
  // CHECK: ds.shard
  // CHECK: ds.parameter "attn.qkv.weight#2"
  // CHECK: ds.shard
  // CHECK-NOT: ds.split
  %m = ds.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %mb = ds.add %b, %m : (tensor<24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %q, %k, %v = ds.split %mb {axis = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %q4 = ds.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %k4 = ds.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %v4 = ds.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %qt = ds.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = ds.transpose %k4 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %vt = ds.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %s = ds.matmul %qt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %c = ds.matmul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ct = ds.transpose %c {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %cm = ds.reshape %ct : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %y = ds.matmul %cm, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Three heads do not split over two ranks.
func.func @heads(%x: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %wq = ds.parameter "attn.q.weight" = dense<0.5> : tensor<6x6xf32>
  %wo = ds.parameter "attn.out.weight" = dense<0.25> : tensor<6x6xf32>
  %q = ds.matmul %x, %wq : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  // expected-error@+1 {{tensor parallelism: layer 'attn.out.weight' cannot stay split over tp=2 through this ds.reshape of 'tensor<2x4x6xf32>' (attention heads or a reshaped dimension that do not divide)}}
  %q4 = ds.reshape %q : (tensor<2x4x6xf32>) -> tensor<2x4x3x2xf32>
  %back = ds.reshape %q4 : (tensor<2x4x3x2xf32>) -> tensor<2x4x6xf32>
  %y = ds.matmul %back, %wo : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A layer width that does not divide.
func.func @width(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = ds.parameter "fc1.weight" = dense<0.5> : tensor<8x15xf32>
  %w2 = ds.parameter "fc2.weight" = dense<0.25> : tensor<15x8xf32>
  %h = ds.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x15xf32>) -> tensor<4x15xf32>
  %a = ds.relu %h : tensor<4x15xf32>
  // expected-error@+1 {{tensor parallelism: layer 'fc2.weight' has 15 input features, which do not divide over tp=2}}
  %y = ds.matmul %a, %w2 : (tensor<4x15xf32>, tensor<15x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// timm's packed qkv: reshape to [B, T, 3, H, D], permute, gather part i.
// Each part becomes its own weight, reshaped and transposed without the
// part axis.
// CHECK-LABEL: func.func @packed_qkv
func.func @packed_qkv(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = ds.parameter "qkv.weight" = dense<0.5> : tensor<8x24xf32>
  %wo = ds.parameter "proj.weight" = dense<0.25> : tensor<8x8xf32>
  %i0 = ds.constant dense<0> : tensor<i64>
  %i1 = ds.constant dense<1> : tensor<i64>
  %i2 = ds.constant dense<2> : tensor<i64>
  // CHECK: ds.parameter "qkv.weight#0" = dense<5.000000e-01> : tensor<8x8xf32>
  // CHECK: ds.shard
  // CHECK: ds.reshape %{{.+}} : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  // CHECK: ds.transpose %{{.+}} {permutation = array<i64: 0, 2, 1, 3>}
  // CHECK-NOT: ds.gather
  %m = ds.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %r = ds.reshape %m : (tensor<2x4x24xf32>) -> tensor<2x4x3x2x4xf32>
  %t = ds.transpose %r {permutation = array<i64: 2, 0, 3, 1, 4>} : (tensor<2x4x3x2x4xf32>) -> tensor<3x2x2x4x4xf32>
  %q = ds.gather %t, %i0 {axis = 0 : i64} : (tensor<3x2x2x4x4xf32>, tensor<i64>) -> tensor<2x2x4x4xf32>
  %k = ds.gather %t, %i1 {axis = 0 : i64} : (tensor<3x2x2x4x4xf32>, tensor<i64>) -> tensor<2x2x4x4xf32>
  %v = ds.gather %t, %i2 {axis = 0 : i64} : (tensor<3x2x2x4x4xf32>, tensor<i64>) -> tensor<2x2x4x4xf32>
  %kt = ds.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %s = ds.matmul %q, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ds.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %c = ds.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ct = ds.transpose %c {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %cm = ds.reshape %ct : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %y = ds.matmul %cm, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// nn.Linear as torch.onnx.export writes it with constant folding off: the
// weight reaches the matmul through a transpose. It is stored transposed
// ("W.T") and split like any other weight.
// CHECK-LABEL: func.func @transposed_weights
func.func @transposed_weights(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = ds.parameter "fc1.weight" = dense<0.5> : tensor<16x8xf32>
  %w2 = ds.parameter "fc2.weight" = dense<0.25> : tensor<8x16xf32>
  // CHECK: %[[W1:.+]] = ds.parameter "fc1.weight.T" = dense<5.000000e-01> : tensor<8x16xf32> {ds.transpose_of = "fc1.weight"}
  // CHECK: %[[S:.+]] = ds.shard %[[W1]] {sharding = #ds.sharding<{{\[\[}}], ["tp"]]>} : tensor<8x16xf32>
  // CHECK: ds.matmul %arg0, %[[S]]
  // CHECK-NOT: ds.transpose
  %w1t = ds.transpose %w1 {permutation = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %w2t = ds.transpose %w2 {permutation = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %h = ds.matmul %x, %w1t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = ds.relu %h : tensor<4x16xf32>
  %y = ds.matmul %a, %w2t : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A softmax over the features a column split would cut needs all of them,
// like a layer norm: the pair stays whole (no error), and since nothing
// else splits, a warning says every weight is replicated.
// CHECK-LABEL: func.func @softmax_over_features
// CHECK-NOT: ds.shard
// expected-warning@+1 {{no weight matmul pair (column-parallel, then row-parallel) to split over tp=2 in 'softmax_over_features'}}
func.func @softmax_over_features(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = ds.parameter "fc1.weight" = dense<0.5> : tensor<8x16xf32>
  %w2 = ds.parameter "fc2.weight" = dense<0.25> : tensor<16x8xf32>
  %h = ds.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %p = ds.softmax %h {axis = 1 : i64} : tensor<4x16xf32>
  %y = ds.matmul %p, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// GPT-2 as PyTorch 2 exports it: c_attn on the flattened tokens [B*S, 3D],
// reshaped back to [B, S, 3D] and split (each part keeps the reshape), and
// the causal mask computed from initializers (a where of parameters) that
// the region reads whole, not a split in the way.
// CHECK-LABEL: func.func @flat_qkv_mask
// CHECK: ds.parameter "c_attn#0" = dense<5.000000e-01> : tensor<8x8xf32>
// CHECK-NEXT: ds.shard
// CHECK-NEXT: ds.matmul {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: ds.reshape {{.*}} -> tensor<2x4x8xf32>
// CHECK: ds.parameter "c_attn#2"
// CHECK-NEXT: ds.shard
// CHECK-NOT: ds.split
// CHECK: ds.where
func.func @flat_qkv_mask(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = ds.parameter "c_attn" = dense<0.5> : tensor<8x24xf32>
  %wo = ds.parameter "c_proj" = dense<0.25> : tensor<8x8xf32>
  %zero = ds.parameter "val_0" = dense<0.0> : tensor<f32>
  %min = ds.parameter "val_1" = dense<-3.4e38> : tensor<f32>
  %causal = ds.constant dense<true> : tensor<1x1x4x4xi1>
  %x2 = ds.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %m = ds.matmul %x2, %w : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
  %m3 = ds.reshape %m : (tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %q, %k, %v = ds.split %m3 {axis = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %q4 = ds.reshape %q : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %k4 = ds.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %v4 = ds.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %qt = ds.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = ds.transpose %k4 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %vt = ds.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %mask = ds.where %causal, %zero, %min : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %s = ds.matmul %qt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %sm = ds.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ds.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %c = ds.matmul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ct = ds.transpose %c {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %cm = ds.reshape %ct : (tensor<2x4x2x4xf32>) -> tensor<8x8xf32>
  %y = ds.matmul %cm, %wo : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %y3 = ds.reshape %y : (tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %y3 : tensor<2x4x8xf32>
}
