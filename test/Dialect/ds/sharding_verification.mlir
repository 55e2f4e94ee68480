// Each **Constraints:** item of the sharding ops and attributes, provoked once.
// RUN: ds-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{mesh axis 'tp' appears twice}}
module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>, #ds.axis<"tp" = 2>]>} {}

// -----

// expected-error@+2 {{mesh axis 'tp' has size 0}}
// expected-error@+1 {{failed to parse DS_MeshAttr parameter 'axes'}}
module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 0>]>} {}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @axis_twice(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{mesh axis 'tp' is used twice}}
    %s = ds.shard %x {sharding = #ds.sharding<[["tp"], ["tp"]]>} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @shard_rank(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{sharding has 1 dimensions, the operand 2}}
    %s = ds.shard %x {sharding = #ds.sharding<[["tp"]]>} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 3>]>} {
  func.func @shard_divide(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{dimension 1 (8) does not divide over its mesh axes}}
    %s = ds.shard %x {sharding = #ds.sharding<[[], ["tp"]]>} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @shard_unknown_axis(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{mesh has no axis 'dp'}}
    %s = ds.shard %x {sharding = #ds.sharding<[["dp"], []]>} : tensor<4x8xf32>
    return
  }
}

// -----

func.func @no_mesh(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{needs a ds.mesh on the module}}
  %r = ds.all_reduce %x {axes = ["tp"]} : tensor<4x8xf32>
  return
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @unknown_axis(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{mesh has no axis 'dp'}}
    %r = ds.all_reduce %x {axes = ["dp"]} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @axis_repeated(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{names axis 'tp' twice}}
    %r = ds.all_reduce %x {axes = ["tp", "tp"]} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @gather_dim(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{dim 2 is out of range for rank 2}}
    %g = ds.all_gather %x {axes = ["tp"], dim = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @gather_global_shape(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{in the global view the result has the operand's shape}}
    %g = ds.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x16xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 3>]>} {
  func.func @slice_divide(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{dimension 1 (8) does not divide by the group size 3}}
    %g = ds.shard_slice %x {axes = ["tp"], dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @gather_local(%x: tensor<4x8xf32>) attributes {ds.spmd} {
    // expected-error@+1 {{result dimension 1 must be the operand's times the group size 2 on dim 1}}
    %g = ds.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @scatter_local(%x: tensor<4x8xf32>) attributes {ds.spmd} {
    // expected-error@+1 {{result dimension 0 must be the operand's divided by the group size 2 on dim 0}}
    %g = ds.reduce_scatter %x {axes = ["tp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @broadcast_root(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{root 2 is not a rank of the group of 2}}
    %b = ds.broadcast %x {axes = ["tp"], root = 2 : i64} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @all_to_all_local(%x: tensor<4x8xf32>) attributes {ds.spmd} {
    // expected-error@+1 {{result shape does not follow from split_dim and concat_dim}}
    %a = ds.all_to_all %x {axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"tp" = 2>]>} {
  func.func @all_to_all_dims(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{split_dim and concat_dim must be dimensions of the operand}}
    %a = ds.all_to_all %x {axes = ["tp"], split_dim = 2 : i64, concat_dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {ds.mesh = #ds.mesh<[#ds.axis<"dp" = 2>]>} {
  func.func @quantized_gather_of_integers(%x: tensor<8xi64>) attributes {ds.spmd} {
    // expected-error@+1 {{quantize_block needs a positive block, outer 1 and an f32, f16 or bf16 operand}}
    %g = ds.all_gather %x {axes = ["dp"], dim = 0 : i64, quantize_block = 256 : i64} : (tensor<8xi64>) -> tensor<16xi64>
    return
  }
}
