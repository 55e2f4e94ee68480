// Each **Constraints:** item of DSOps.td, provoked once.
// RUN: ds-opt %s -split-input-file -verify-diagnostics

// Binary operands must share an element type.
func.func @binary_element_types(%a: tensor<2xf32>, %b: tensor<2xf64>) {
  // expected-error@+2 {{operands have different element types}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.add %a, %b : (tensor<2xf32>, tensor<2xf64>) -> tensor<2xf32>
  return
}

// -----

// Binary operand shapes must broadcast.
func.func @binary_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error@+2 {{do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.mul %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// The result must have the broadcast shape.
func.func @binary_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.sub %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

// Comparisons produce i1.
func.func @compare_result(%a: tensor<2xf32>) {
  // expected-error@+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = ds.less %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// where's branches share an element type.
func.func @where_branches(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xi64>) {
  // expected-error@+2 {{branches have different element types}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.where %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

// where's operands broadcast together.
func.func @where_broadcast(%c: tensor<3xi1>, %a: tensor<2xf32>) {
  // expected-error@+2 {{do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.where %c, %a, %a : (tensor<3xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// Unary ops keep their type.
func.func @unary_type(%a: tensor<2xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "ds.exp"(%a) : (tensor<2xf32>) -> tensor<3xf32>
  return
}

// -----

// cast keeps the shape.
func.func @cast_shape(%a: tensor<2xf32>) {
  // expected-error@+1 {{same shape}}
  %0 = ds.cast %a : tensor<2xf32> -> tensor<3xi64>
  return
}

// -----

// matmul contraction dimensions agree.
func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+2 {{contraction dimensions differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// matmul batch dimensions broadcast.
func.func @matmul_batch(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error@+2 {{batch dimensions}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----


// Reduction axes are in range.
func.func @reduce_range(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{reduction axis 2 is out of range [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_sum %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Reduction axes are sorted and unique.
func.func @reduce_sorted(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{reduction axes must be sorted and unique}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_mean %a {axes = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<1x1xf32>
  return
}

// -----

// The reduced shape follows keepdims.
func.func @reduce_keepdims(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{incompatible with return type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_max %a {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

// softmax's axis is in range.
func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 2 is out of range [0, 2)}}
  %0 = ds.softmax %a {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

// softmax needs rank >= 1.
func.func @softmax_rank(%a: tensor<f32>) {
  // expected-error@+1 {{needs an operand of rank >= 1}}
  %0 = ds.softmax %a {axis = 0 : i64} : tensor<f32>
  return
}

// -----

// layer_norm's axis is in range.
func.func @layer_norm_axis(%a: tensor<2x3xf32>, %g: tensor<3xf32>) {
  // expected-error@+1 {{axis 5 is out of range}}
  %0 = ds.layer_norm %a, %g {axis = 5 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// softmax_cross_entropy_grad's loss result is a scalar.
func.func @cross_entropy_grad_loss(%x: tensor<4x8xf32>, %l: tensor<4xi64>, %d: tensor<f32>) {
  // expected-error@+1 {{loss must be a scalar of the logits' element type}}
  %0:2 = ds.softmax_cross_entropy_grad %x, %l, %d : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad's addend has the operand's type.
func.func @layer_norm_grad_addend(%a: tensor<2x3xf32>, %g: tensor<3xf32>, %r: tensor<1x3xf32>) {
  // expected-error@+1 {{addend must have the operand's type}}
  %0:3 = ds.layer_norm_grad %a, %g, %a addend %r {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<1x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// layer_norm's scale has the normalized shape.
func.func @layer_norm_scale(%a: tensor<2x3xf32>, %g: tensor<2xf32>) {
  // expected-error@+1 {{scale must be [3] of 'f32'}}
  %0 = ds.layer_norm %a, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

// layer_norm's bias has the normalized shape.
func.func @layer_norm_bias(%a: tensor<2x3xf32>, %g: tensor<3xf32>, %b: tensor<1xf32>) {
  // expected-error@+1 {{bias must be [3]}}
  %0 = ds.layer_norm %a, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  return
}

// -----

// reshape keeps the element count.
func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot reshape}}
  %0 = ds.reshape %a : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

// reshape keeps the element type.
func.func @reshape_type(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{changes the element type}}
  %0 = ds.reshape %a : (tensor<2x3xf32>) -> tensor<6xf64>
  return
}

// -----

// squeeze removes only unit dimensions.
func.func @squeeze_extent(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{cannot squeeze dimension 0 of extent 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.squeeze %a {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

// unsqueeze axes are in the result's range.
func.func @unsqueeze_range(%a: tensor<2xf32>) {
  // expected-error@+2 {{unsqueeze axis 3 is out of range [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.unsqueeze %a {axes = array<i64: 3>} : (tensor<2xf32>) -> tensor<2x1xf32>
  return
}

// -----

// transpose needs a permutation.
func.func @transpose_perm(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{is not a permutation}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.transpose %a {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

// slice needs one start and step per dimension.
func.func @slice_arity(%a: tensor<4xf32>) {
  // expected-error@+1 {{needs one start and one step per dimension}}
  %0 = ds.slice %a {starts = array<i64: 0, 0>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

// slice steps are non-zero.
func.func @slice_step(%a: tensor<4xf32>) {
  // expected-error@+1 {{step of dimension 0 is zero}}
  %0 = ds.slice %a {starts = array<i64: 0>, steps = array<i64: 0>} : (tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

// slice stays inside the operand.
func.func @slice_bounds(%a: tensor<4xf32>) {
  // expected-error@+1 {{dimension 0 reads indices 2 to 6, outside [0, 4)}}
  %0 = ds.slice %a {starts = array<i64: 2>, steps = array<i64: 2>} : (tensor<4xf32>) -> tensor<3xf32>
  return
}

// -----

// slice keeps rank and element type.
func.func @slice_rank(%a: tensor<4xf32>) {
  // expected-error@+1 {{result must have the operand's rank and element type}}
  %0 = ds.slice %a {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

// concat operands agree off the axis.
func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error@+2 {{differ off axis 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// concat's axis is in range.
func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error@+2 {{axis 2 is out of range [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.concat %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// split pieces add up to the operand.
func.func @split_sum(%a: tensor<2x5xf32>) {
  // expected-error@+1 {{result extents add up to 4 along axis 1, not 5}}
  %0:2 = ds.split %a {axis = 1 : i64} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

// split pieces agree with the operand off the axis.
func.func @split_shape(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{differs from the operand off axis 1}}
  %0:2 = ds.split %a {axis = 1 : i64} : (tensor<2x4xf32>) -> (tensor<3x2xf32>, tensor<2x2xf32>)
  return
}

// -----

// gather's axis is in range.
func.func @gather_axis(%a: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error@+2 {{axis 2 is out of range [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.gather %a, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x3x4xf32>
  return
}

// -----

// gather indices are i32 or i64.
func.func @gather_indices(%a: tensor<2x3xf32>, %i: tensor<4xf32>) {
  // expected-error@+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer}}
  %0 = ds.gather %a, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

// expand broadcasts to the result.
func.func @expand_broadcast(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot broadcast}}
  %0 = ds.expand %a : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Parameters are named.
func.func @parameter_name() {
  // expected-error@+1 {{needs a non-empty name}}
  %0 = ds.parameter "" = dense<1.0> : tensor<2xf32>
  return
}

// -----

// Values have static shapes.
func.func @dynamic(%a: tensor<?xf32>) {
  // expected-error@+1 {{must be statically shaped tensor}}
  %0 = ds.exp %a : tensor<?xf32>
  return
}

// -----

// trilu needs a matrix.
func.func @trilu_rank(%a: tensor<4xf32>) {
  // expected-error@+1 {{needs an operand of rank >= 2}}
  %0 = ds.trilu %a {k = 0 : i64, upper = true} : tensor<4xf32>
  return
}

// -----

// bitcast keeps the element width.
func.func @bitcast_width(%a: tensor<4xf32>) {
  // expected-error@+1 {{needs element types of one width, got 'f32' and 'i64'}}
  %0 = ds.bitcast %a : tensor<4xf32> -> tensor<4xi64>
  return
}

// -----

// Bitwise ops take integers only.
func.func @bitwise_float(%a: tensor<4xf32>) {
  // expected-error@+1 {{must be statically shaped tensor of 8-bit signless integer}}
  %0 = ds.bitwise_and %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// cumsum's axis is in range.
func.func @cumsum_axis(%a: tensor<4xf32>) {
  // expected-error@+1 {{axis 1 is out of range [0, 1)}}
  %0 = ds.cumsum %a {axis = 1 : i64} : tensor<4xf32>
  return
}

// -----

// Predicates produce i1 of the operand's shape.
func.func @is_nan_shape(%a: tensor<4xf32>) {
  // expected-error@+1 {{requires the same shape for all operands and results}}
  %0 = ds.is_nan %a : tensor<4xf32> -> tensor<3xi1>
  return
}

// -----

// arg_max's result has the reduced shape.
func.func @arg_max_shape(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{result must have shape [2]}}
  %0 = ds.arg_max %a {axis = 1 : i64, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xi64>
  return
}

// -----

// arg_min's axis is in range.
func.func @arg_min_axis(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 2 is out of range [0, 2)}}
  %0 = ds.arg_min %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  return
}

// -----

// Conv: group must divide the channels, with C/group weight channels.
func.func @conv_group(%x: tensor<1x4x5x5xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error@+1 {{group 2 must divide 4 input and 6 output channels}}
  %0 = ds.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return
}

// -----

// Conv: the result shape follows from the window arithmetic.
func.func @conv_result(%x: tensor<1x3x5x5xf32>, %w: tensor<2x3x3x3xf32>) {
  // expected-error@+1 {{result must be [1x2x2x2]}}
  %0 = ds.conv %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<2x3x3x3xf32>) -> tensor<1x2x3x3xf32>
  return
}

// -----

// Conv: bias is [M].
func.func @conv_bias(%x: tensor<1x3x5x5xf32>, %w: tensor<2x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{bias must be [2]}}
  %0 = ds.conv %x, %w, %b {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<2x3x3x3xf32>, tensor<3xf32>) -> tensor<1x2x3x3xf32>
  return
}

// -----

// Pool: a window larger than the padded input is only ceil_mode's last
// one (stride 3 here would make this 1x1 result ceil_mode's).
func.func @pool_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error@+1 {{spatial dimension 0 of the result (1) does not fit the windows}}
  %0 = ds.pool %x {kind = #ds<pool_kind max>, kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

// Pool: one positive kernel entry per spatial dimension.
func.func @pool_kernel(%x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{needs one kernel, stride and dilation and two pads per spatial dimension}}
  %0 = ds.pool %x {kind = #ds<pool_kind avg>, kernel = array<i64: 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

// top_k: k must fit the axis.
func.func @top_k_range(%x: tensor<3x4xf32>) {
  // expected-error@+1 {{k = 5 is outside [0, 4]}}
  %v, %i = ds.top_k %x {axis = 1 : i64, k = 5 : i64} : (tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>)
  return
}

// -----

// top_k: both results have the operand's shape with k on the axis.
func.func @top_k_shape(%x: tensor<3x4xf32>) {
  // expected-error@+1 {{results must have shape [3x2]}}
  %v, %i = ds.top_k %x {axis = 1 : i64, k = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<2x2xi64>)
  return
}

// -----

// top_k: values keep the operand's element type.
func.func @top_k_type(%x: tensor<3x4xf32>) {
  // expected-error@+1 {{values must have the operand's element type}}
  %v, %i = ds.top_k %x {axis = 1 : i64, k = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf64>, tensor<3x2xi64>)
  return
}

// -----

// scatter_elements: indices and updates share one shape.
func.func @scatter_shapes(%d: tensor<4x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x2xf32>) {
  // expected-error@+1 {{indices and updates must share one shape of the data's rank}}
  %0 = ds.scatter_elements %d, %i, %u {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>) -> tensor<4x3xf32>
  return
}

// -----

// scatter_elements: indices fit the data off the axis.
func.func @scatter_off_axis(%d: tensor<4x3xf32>, %i: tensor<2x5xi64>, %u: tensor<2x5xf32>) {
  // expected-error@+1 {{indices are larger than the data off the axis}}
  %0 = ds.scatter_elements %d, %i, %u {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2x5xi64>, tensor<2x5xf32>) -> tensor<4x3xf32>
  return
}

// -----

// scatter_elements: updates and result have the data's type.
func.func @scatter_type(%d: tensor<4x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf64>) {
  // expected-error@+1 {{updates and result must have the data's type}}
  %0 = ds.scatter_elements %d, %i, %u {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf64>) -> tensor<4x3xf32>
  return
}

// -----

// scatter_elements: the axis is in range.
func.func @scatter_axis(%d: tensor<4x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 2 is out of range}}
  %0 = ds.scatter_elements %d, %i, %u {axis = 2 : i64} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// pool: average pooling needs floats.
func.func @pool_avg_int(%x: tensor<1x1x4x4xi32>) {
  // expected-error@+1 {{average pooling needs a floating-point input}}
  %0 = ds.pool %x {kind = #ds<pool_kind avg>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xi32>) -> tensor<1x1x3x3xi32>
  return
}

// -----

// pool: the result keeps the input's element type.
func.func @pool_type(%x: tensor<1x1x4x4xf32>) {
  // expected-error@+1 {{result must have the input's element type}}
  %0 = ds.pool %x {kind = #ds<pool_kind max>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf64>
  return
}

// -----

// max_pool_indices: the windows must fit, as for pool.
func.func @max_pool_indices_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error@+1 {{spatial dimension 0 of the result (1) does not fit the windows}}
  %0 = ds.max_pool_indices %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xi64>
  return
}

// -----

// matmul: integer operands are i32 or i64 (8-bit ones are widened first).
func.func @matmul_i8(%a: tensor<2x3xi8>, %b: tensor<3x2xi8>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values}}
  %0 = ds.matmul %a, %b : (tensor<2x3xi8>, tensor<3x2xi8>) -> tensor<2x2xi8>
  return
}

// -----

func.func @matmul_transpose_vector(%a: tensor<4xf32>, %b: tensor<4x3xf32>) -> tensor<3xf32> {
  // expected-error@+2 {{transpose_lhs needs an operand of rank >= 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.matmul %a, %b {transpose_lhs = true} : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_transpose_int(%a: tensor<4x2xi64>, %b: tensor<4x3xi64>) -> tensor<2x3xi64> {
  // expected-error@+2 {{transpose_lhs needs float operands}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.matmul %a, %b {transpose_lhs = true} : (tensor<4x2xi64>, tensor<4x3xi64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// The contraction is checked on the transposed view: [4,2] x [4,3]^T.
func.func @matmul_transposed_contraction(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>) -> tensor<4x4xf32> {
  // expected-error@+2 {{contraction dimensions differ}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.matmul %a, %b {transpose_rhs = true} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @fused_arg_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body has 2 arguments for 1 inputs}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    ds.yield %a : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_arg_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body argument #0 must be 'tensor<f32>', got 'tensor<4xf32>'}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    ds.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_broadcast(%x: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{input #0 of type 'tensor<3xf32>' does not broadcast to the result 'tensor<4xf32>'}}
  %0 = ds.fused_elementwise %x : (tensor<3xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    ds.yield %a : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_not_elementwise(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body op 'ds.reshape' is not an elementwise ds op}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    %s = ds.reshape %a : (tensor<f32>) -> tensor<1xf32>
    %u = ds.reshape %s : (tensor<1xf32>) -> tensor<f32>
    ds.yield %u : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_body_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body op 'ds.add' works on 'tensor<2xf32>', not on one element (a rank-0 tensor)}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    %s = ds.add %a, %a : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
    ds.yield %a : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_yield_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body yields 'tensor<i1>', expected 'tensor<f32>'}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    %n = ds.is_nan %a : tensor<f32> -> tensor<i1>
    ds.yield %n : tensor<i1>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @yield_outside(%x: tensor<f32>) -> tensor<f32> {
  // expected-error@+1 {{expects parent op 'ds.fused_elementwise'}}
  ds.yield %x : tensor<f32>
}

// -----

func.func @conv_channels_last_result(%x: tensor<1x4x4x3xf32>, %w: tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32> {
  // expected-error@+1 {{result must be [1x4x4x2]}}
  %0 = ds.conv %x, %w {channels_last, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x3xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %0 : tensor<1x2x4x4xf32>
}

// -----

func.func @pool_channels_last_type(%x: tensor<1x4x4x2xi32>) -> tensor<1x2x2x2xi32> {
  // expected-error@+1 {{a channels_last pooling takes an f32 input of rank >= 3}}
  %0 = ds.pool %x {channels_last, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, kind = #ds<pool_kind max>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x4x2xi32>) -> tensor<1x2x2x2xi32>
  return %0 : tensor<1x2x2x2xi32>
}

// -----

// Dropout's ratio keeps some elements.
func.func @random_mask_ratio(%k: tensor<i64>) -> tensor<4xf32> {
  // expected-error@+1 {{ratio must be in [0, 1), got 1}}
  %0 = ds.random_mask %k {ratio = 1.0 : f64, stream = 0 : i64} : tensor<i64> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The key is one i64.
func.func @random_mask_key(%k: tensor<2xi64>) -> tensor<4xf32> {
  // expected-error@+1 {{operand #0 must be 0D tensor of 64-bit signless integer values}}
  %0 = ds.random_mask %k {ratio = 0.5 : f64, stream = 0 : i64} : tensor<2xi64> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// fused_matmul: the result has the product's type.
func.func @fused_matmul_result(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{result must be the product's type 'tensor<2x5xf32>'}}
  %0 = ds.fused_matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

// fused_matmul: the product's constraints hold (contraction).
func.func @fused_matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+1 {{contraction dimensions differ}}
  %0 = ds.fused_matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: shape and strides come together.
func.func @fused_matmul_view_pair(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{lhs_shape and lhs_strides come together}}
  %0 = ds.fused_matmul %a, %b {lhs_shape = array<i64: 2, 3>} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: a view stays inside its tensor.
func.func @fused_matmul_view_past(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{lhs view reaches past its operand}}
  %0 = ds.fused_matmul %a, %b {lhs_shape = array<i64: 2, 3>, lhs_strides = array<i64: 4, 1>} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: an offset view stays inside its tensor too.
func.func @fused_matmul_view_offset(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{lhs view reaches past its operand}}
  %0 = ds.fused_matmul %a, %b {lhs_shape = array<i64: 2, 3>, lhs_strides = array<i64: 3, 1>, lhs_offset = 1 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: the operand beside a view is a matrix too.
func.func @fused_matmul_view_vector(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{strided views need operands of rank >= 2}}
  %0 = ds.fused_matmul %b, %a {rhs_shape = array<i64: 3, 2>, rhs_strides = array<i64: 1, 3>} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

// fused_matmul views: an offset belongs to a view.
func.func @fused_matmul_offset_alone(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{rhs_offset needs a view}}
  %0 = ds.fused_matmul %a, %b {rhs_offset = 1 : i64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: an operand view steps by 1 along rows or columns.
func.func @fused_matmul_view_unit(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+1 {{lhs view needs unit steps along its rows or columns}}
  %0 = ds.fused_matmul %a, %b {lhs_shape = array<i64: 2, 3, 4>, lhs_strides = array<i64: 1, 8, 2>} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

// fused_matmul views: a view is not also transposed by the flag.
func.func @fused_matmul_view_flag(%a: tensor<3x2xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{lhs view is not also transposed by transpose_lhs}}
  %0 = ds.fused_matmul %a, %b {transpose_lhs = true, lhs_shape = array<i64: 2, 3>, lhs_strides = array<i64: 1, 2>} : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul views: the result view writes every element once.
func.func @fused_matmul_view_dense(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) {
  // expected-error@+1 {{result view must write every element once}}
  %0 = ds.fused_matmul %a, %b {result_shape = array<i64: 2, 2>, result_strides = array<i64: 1, 1>} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<4xf32>
  return
}

// -----

// fused_matmul views: the result view has the product's shape.
func.func @fused_matmul_view_shape(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) {
  // expected-error@+1 {{result_shape must be the product's shape [2x2], got [4x1]}}
  %0 = ds.fused_matmul %a, %b {result_shape = array<i64: 4, 1>, result_strides = array<i64: 1, 1>} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<4xf32>
  return
}

// -----

// fused_matmul views: a result view has no bias (its columns would move).
func.func @fused_matmul_view_bias(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %c: tensor<2xf32>) {
  // expected-error@+1 {{a result view comes with neither bias nor addend}}
  %0 = ds.fused_matmul %a, %b bias %c {result_shape = array<i64: 2, 2>, result_strides = array<i64: 1, 2>} : (tensor<2x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  return
}

// -----

// fused_matmul: rhs has rank >= 2.
func.func @fused_matmul_vector(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{rhs must have rank >= 2}}
  %0 = ds.fused_matmul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

// fused_matmul: the bias is [N].
func.func @fused_matmul_bias(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<1x5xf32>) {
  // expected-error@+1 {{bias must be [5]}}
  %0 = ds.fused_matmul %a, %b bias %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<1x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul: the addend has the result's type.
func.func @fused_matmul_addend(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<5xf32>) {
  // expected-error@+1 {{addend must have the result's type}}
  %0 = ds.fused_matmul %a, %b addend %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul: alpha is finite.
func.func @fused_matmul_alpha(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{alpha must be finite}}
  %0 = ds.fused_matmul %a, %b {alpha = 0x7FF0000000000000 : f64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_matmul: alpha is finite in f32, the kernel's precision.
func.func @fused_matmul_alpha_f32(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error@+1 {{alpha must be finite as an f32}}
  %0 = ds.fused_matmul %a, %b {alpha = 1.0e+300 : f64} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// fused_elementwise: a body that computes something, in f32 and i1.
func.func @fused_nothing(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body computes nothing (it yields an argument)}}
  %0 = ds.fused_elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<f32>):
    ds.yield %a : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fused_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+1 {{computes in f32 and i1 only, got a result of 'tensor<4xi32>'}}
  %0 = ds.fused_elementwise %x : (tensor<4xi32>) -> tensor<4xi32> {
  ^bb0(%a: tensor<i32>):
    %b = ds.neg %a : tensor<i32>
    ds.yield %b : tensor<i32>
  }
  return %0 : tensor<4xi32>
}

// -----

// fused_matmul: f32 operands.
func.func @fused_matmul_f64(%a: tensor<2x3xf64>, %b: tensor<3x5xf64>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor of 32-bit float values}}
  %0 = ds.fused_matmul %a, %b : (tensor<2x3xf64>, tensor<3x5xf64>) -> tensor<2x5xf64>
  return
}

// -----

// attention: the views have 4 entries.
func.func @attention_0(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{query_shape and query_strides must have 4 entries}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: a view stays inside its operand.
func.func @attention_561(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{key view reaches past its operand}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 2>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: a view from its offset stays inside its operand.
func.func @attention_offset(%t: tensor<2x3x12xf32>) {
  // expected-error@+1 {{value view reaches past its operand}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 2, 1, 3, 4>, query_strides = array<i64: 36, 4, 12, 1>, key_offset = 4 : i64, key_shape = array<i64: 2, 1, 3, 4>, key_strides = array<i64: 36, 4, 12, 1>, value_offset = 9 : i64, value_shape = array<i64: 2, 1, 3, 4>, value_strides = array<i64: 36, 4, 12, 1>, scale = 1.0 : f64} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x1x4xf32>
  return
}

// -----

// attention: a view has stride 1 in one of its last two dimensions.
func.func @attention_1119(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{value view needs stride 1}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 0, 12, 2, 2>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: the views agree.
func.func @attention_1691(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{views disagree}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 2, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: key/value heads divide query heads.
func.func @attention_2215(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{must divide query heads}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 3, 3, 4>, key_strides = array<i64: 0, 0, 4, 1>, value_shape = array<i64: 1, 3, 3, 4>, value_strides = array<i64: 0, 0, 4, 1>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: the result is [B, Hq, Sq, Dv].
func.func @attention_2763(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{result must be [1x3x2x4]}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64, result_bshd} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: scale is finite.
func.func @attention_3324(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{scale must be finite}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 0x7FF0000000000000 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: the mask broadcasts to the scores.
func.func @attention_mask(%t: tensor<1x2x3x4xf32>, %m: tensor<2x3xf32>) {
  // expected-error@+1 {{does not broadcast to the scores}}
  %0 = ds.attention %t, %t, %t mask %m {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<2x3xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: a selecting mask is i1.
func.func @attention_mask_fill(%t: tensor<1x2x3x4xf32>, %m: tensor<3x3xf32>) {
  // expected-error@+1 {{mask must be i1 with mask_fill}}
  %0 = ds.attention %t, %t, %t mask %m {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64, mask_fill = -1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<3x3xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// attention: mask_fill needs a mask.
func.func @attention_fill_alone(%t: tensor<1x2x3x4xf32>) {
  // expected-error@+1 {{mask_fill needs a mask}}
  %0 = ds.attention %t, %t, %t {query_shape = array<i64: 1, 2, 3, 4>, query_strides = array<i64: 24, 12, 4, 1>, key_shape = array<i64: 1, 2, 3, 4>, key_strides = array<i64: 24, 12, 4, 1>, value_shape = array<i64: 1, 2, 3, 4>, value_strides = array<i64: 24, 12, 4, 1>, scale = 1.0 : f64, mask_fill = -1.0 : f64} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// sum_squares: at least one operand.
func.func @sum_squares_empty() {
  // expected-error@+1 {{needs at least one operand}}
  %0 = ds.sum_squares : () -> tensor<f32>
  return
}

// -----

// rms_norm: the scale is [N].
func.func @rms_norm_scale(%x: tensor<2x4xf32>, %w: tensor<2xf32>) {
  // expected-error@+1 {{scale must be [4]}}
  %0 = ds.rms_norm %x, %w {epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm: epsilon is finite and non-negative.
func.func @rms_norm_eps(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{epsilon must be finite and >= 0}}
  %0 = ds.rms_norm %x {epsilon = -1.0 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm: rank >= 1.
func.func @rms_norm_rank(%x: tensor<f32>) {
  // expected-error@+1 {{rank >= 1}}
  %0 = ds.rms_norm %x {epsilon = 1.0e-5 : f32} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

// conv: the addend has the result's type.
func.func @conv_addend(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %r: tensor<1x3x4x3xf32>) {
  // expected-error@+1 {{addend must have the result's type}}
  %0 = ds.conv %x, %w addend %r {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<1x3x4x3xf32>) -> tensor<1x3x4x4xf32>
  return
}

// -----

// fused_matmul: a softmax epilogue follows nothing but the scale.
func.func @fused_matmul_softmax_bias(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %c: tensor<4xf32>) {
  // expected-error@+1 {{softmax comes with neither bias, activation, addend nor a result view}}
  %0 = ds.fused_matmul %a, %b bias %c {softmax} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: softmax_grad needs the softmax's result as its addend.
func.func @fused_matmul_softmax_grad_no_addend(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{combine = softmax_grad needs an addend}}
  %0 = ds.fused_matmul %a, %b {combine = #ds<combine softmax_grad>} : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: a mask only with a row epilogue.
func.func @fused_matmul_mask_alone(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %m: tensor<4x4xi1>) {
  // expected-error@+1 {{mask comes only with softmax or combine = softmax_grad}}
  %0 = ds.fused_matmul %a, %b mask %m {mask_fill = -1.0 : f64} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<4x4xi1>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: an i1 softmax mask selects its mask_fill.
func.func @fused_matmul_mask_no_fill(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %m: tensor<4x4xi1>) {
  // expected-error@+1 {{mask must be f32}}
  %0 = ds.fused_matmul %a, %b mask %m {softmax} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<4x4xi1>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: the mask broadcasts to the result.
func.func @fused_matmul_mask_shape(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %m: tensor<3x4xf32>) {
  // expected-error@+1 {{does not broadcast}}
  %0 = ds.fused_matmul %a, %b mask %m {softmax} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: a softmax_grad mask is i1 without a fill.
func.func @fused_matmul_grad_mask_fill(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>, %y: tensor<4x4xf32>, %m: tensor<4x4xi1>) {
  // expected-error@+1 {{a softmax_grad mask is i1 without mask_fill}}
  %0 = ds.fused_matmul %a, %b addend %y mask %m {combine = #ds<combine softmax_grad>, mask_fill = 0.0 : f64} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4x4xi1>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: mask_fill without a mask.
func.func @fused_matmul_fill_alone(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{mask_fill needs a mask}}
  %0 = ds.fused_matmul %a, %b {softmax, mask_fill = 0.0 : f64} : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// fused_matmul: pre_activation comes with an activation.
func.func @fused_matmul_pre_no_activation(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{pre_activation comes with an activation}}
  %0:2 = ds.fused_matmul %a, %b : (tensor<4x3xf32>, tensor<3x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

// conv: the one activation its kernel applies is hard_swish.
func.func @conv_activation(%x: tensor<1x3x5x5xf32>, %w: tensor<2x3x3x3xf32>) {
  // expected-error@+1 {{activation must be none or hard_swish, not gelu}}
  %0 = ds.conv %x, %w {activation = #ds<activation gelu>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, group = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<2x3x3x3xf32>) -> tensor<1x2x3x3xf32>
  return
}

// -----

// fused_matmul: hard_swish is a convolution's activation only.
func.func @fused_matmul_hard_swish(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{activation hard_swish is a convolution's only}}
  %0 = ds.fused_matmul %a, %b {activation = #ds<activation hard_swish>} : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// cached_attention: the views agree (T included).
func.func @cached_attention_views(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{views disagree}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 2, 4>, query_strides = array<i64: 8, 4, 0, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: key/value heads divide query heads.
func.func @cached_attention_heads(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{must divide query heads}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 3, 1, 4>, query_strides = array<i64: 8, 0, 8, 1>, key_shape = array<i64: 1, 2, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 2, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x3x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: a view stays inside its operand.
func.func @cached_attention_view(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{key view reaches past its operand}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 2>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: a view steps by 1 along one of its last two dimensions.
func.func @cached_attention_stride(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{query view needs stride 1}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 0, 0, 2, 2>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: the caches are [Bc, Hkv, M, D] with M >= T.
func.func @cached_attention_cache(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x2x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{caches must be key tiles [Bc, 1, M / 16, 4, 16]}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x2x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x2x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: the updated caches have the caches' types.
func.func @cached_attention_cache_out(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{updated caches must have the caches' types}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x2x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: positions, lengths and slots are [B].
func.func @cached_attention_rows(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<2xi64>) {
  // expected-error@+1 {{positions must be [1]}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: the result is [B, Hq, T, Dv] (or [B, T, Hq, Dv]).
func.func @cached_attention_result(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{result must be [1x2x1x4]}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x1x2x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: the scale is finite.
func.func @cached_attention_scale(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{scale must be finite}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 1.0e300 : f64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// cached_attention: a window is >= 1.
func.func @cached_attention_window(%q: tensor<1x1x8xf32>, %k: tensor<1x1x4xf32>, %kc: tensor<1x1x1x4x16xf32>, %vc: tensor<1x1x16x4xf32>, %i: tensor<1xi64>) {
  // expected-error@+1 {{window must be >= 1}}
  %o, %kco, %vco = ds.cached_attention %q, %k, %k, %kc, %vc, %i, %i, %i {query_shape = array<i64: 1, 2, 1, 4>, query_strides = array<i64: 8, 4, 8, 1>, key_shape = array<i64: 1, 1, 1, 4>, key_strides = array<i64: 4, 0, 4, 1>, value_shape = array<i64: 1, 1, 1, 4>, value_strides = array<i64: 4, 0, 4, 1>, scale = 0.5 : f64, window = 0 : i64} : (tensor<1x1x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1x2x1x4xf32>, tensor<1x1x1x4x16xf32>, tensor<1x1x16x4xf32>)
  return
}

// -----

// quantized_matmul: bits 8 takes an i8 weight [N, K].
func.func @quantized_matmul_bits8(%x: tensor<2x8xf32>, %w: tensor<4x4xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{bits 8 needs an i8 weight [N, K]}}
  %0 = ds.quantized_matmul %x, %w, %s {} : (tensor<2x8xf32>, tensor<4x4xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: bits 4 takes a ui8 weight [N, K / 2].
func.func @quantized_matmul_bits4(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{bits 4 needs a ui8 weight [N, K / 2]}}
  %0 = ds.quantized_matmul %x, %w, %s {bits = 4 : i64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: bits is 8 or 4.
func.func @quantized_matmul_bits(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{bits 3 needs}}
  %0 = ds.quantized_matmul %x, %w, %s {bits = 3 : i64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: group_size divides K.
func.func @quantized_matmul_group(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{group_size 3 must be 0 or divide K = 8}}
  %0 = ds.quantized_matmul %x, %w, %s {group_size = 3 : i64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: scale is [N] per channel, [N, K / group_size] per group.
func.func @quantized_matmul_scale(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{scale must be [4x2]}}
  %0 = ds.quantized_matmul %x, %w, %s {group_size = 4 : i64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: a zero point has scale's shape and the weight's type.
func.func @quantized_matmul_zero(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>, %z: tensor<4xui8>) {
  // expected-error@+1 {{zero_point must be [4] of the weight's type}}
  %0 = ds.quantized_matmul %x, %w, %s zero_point %z {} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xui8>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: static activations need their scale and zero point.
func.func @quantized_matmul_static(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{input_scale and input_zero_point go with static_per_tensor activations, and only with them}}
  %0 = ds.quantized_matmul %x, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.5 : f64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: a static zero point is a uint8 value.
func.func @quantized_matmul_static_zero(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{input_zero_point must be in [0, 255], got 300}}
  %0 = ds.quantized_matmul %x, %w, %s {activation_quant = #ds<activation_quant static_per_tensor>, input_scale = 0.5 : f64, input_zero_point = 300 : i64} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_conv: one weight scale per output channel.
func.func @quantized_conv_scale(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xi8>, %s: tensor<3xf32>) {
  // expected-error@+1 {{scale must be [4]}}
  %0 = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// quantized_conv: the input scale is positive.
func.func @quantized_conv_input_scale(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{input_scale must be positive and finite as an f32, got 0}}
  %0 = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 1 : i64, input_scale = 0.0 : f64, input_zero_point = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// quantized_conv: ds.conv's geometry (here the result's extent).
func.func @quantized_conv_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{result must be [1x4x8x8]}}
  %0 = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// quantized_conv: a ui8 result says how it is rounded.
func.func @quantized_conv_u8_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{output_scale and output_zero_point go with a ui8 result, and only with it}}
  %0 = ds.quantized_conv %x, %w, %s {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, group = 1 : i64, input_scale = 0.5 : f64, input_zero_point = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<4xf32>) -> tensor<1x4x8x8xui8>
  return
}

// -----

// fake_quantize: a uint8 grid of a positive scale.
func.func @fake_quantize_scale(%x: tensor<4xf32>) {
  // expected-error@+1 {{scale must be positive and finite as an f32, got -1}}
  %0 = ds.fake_quantize %x {scale = -1.0 : f64, zero_point = 0 : i64} : tensor<4xf32>
  return
}

// -----

// quantized_matmul: quantized activations take no zero point.
func.func @quantized_matmul_zero_dynamic(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>, %z: tensor<4xi8>) {
  // expected-error@+1 {{quantized activations take a weight without zero points}}
  %0 = ds.quantized_matmul %x, %w, %s zero_point %z {activation_quant = #ds<activation_quant dynamic_per_row>} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: the result is [..., M, N].
func.func @quantized_matmul_result(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>) {
  // expected-error@+1 {{result must be [2x4]}}
  %0 = ds.quantized_matmul %x, %w, %s {} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x5xf32>
  return
}

// -----

// quantized_matmul: a bias is [N].
func.func @quantized_matmul_bias(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error@+1 {{bias must be [4]}}
  %0 = ds.quantized_matmul %x, %w, %s bias %b {} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>, tensor<5xf32>) -> tensor<2x4xf32>
  return
}

// -----

// quantized_matmul: combine is add or mul.
func.func @quantized_matmul_combine(%x: tensor<2x8xf32>, %w: tensor<4x8xi8>, %s: tensor<4xf32>, %a: tensor<2x4xf32>) {
  // expected-error@+1 {{combine must be add or mul}}
  %0 = ds.quantized_matmul %x, %w, %s addend %a {combine = #ds<combine gelu_grad>} : (tensor<2x8xf32>, tensor<4x8xi8>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// dynamic_quantize: y has the operand's shape.
func.func @dynamic_quantize_shape(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{y must have the operand's shape}}
  %q, %s, %z = ds.dynamic_quantize %x : (tensor<2x8xf32>) -> (tensor<2x4xui8>, tensor<f32>, tensor<ui8>)
  return
}

// -----

// optimization_barrier: operand and result have the same type.
func.func @optimization_barrier_type(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{failed to verify that all of {operand, result} have same type}}
  %0 = "ds.optimization_barrier"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

// A uniform draw's low is at most its high.
func.func @random_uniform_bounds(%k: tensor<i64>) -> tensor<4xf32> {
  // expected-error@+1 {{needs low <= high, got 2.000000e+00 and 1.000000e+00}}
  %0 = ds.random %k {distribution = #ds<distribution uniform>, a = 2.0 : f64, b = 1.0 : f64, stream = 0 : i64} : tensor<i64> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A normal draw's scale is not negative.
func.func @random_normal_scale(%k: tensor<i64>) -> tensor<4xf32> {
  // expected-error@+1 {{needs a non-negative scale, got -1.000000e+00}}
  %0 = ds.random %k {distribution = #ds<distribution normal>, a = 0.0 : f64, b = -1.0 : f64, stream = 0 : i64} : tensor<i64> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Draws are floats.
func.func @random_result_type(%k: tensor<i64>) -> tensor<4xi32> {
  // expected-error@+1 {{result #0 must be statically shaped tensor of}}
  %0 = ds.random %k {distribution = #ds<distribution uniform>, a = 0.0 : f64, b = 1.0 : f64, stream = 0 : i64} : tensor<i64> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// The tables hold every resampled output position's taps.
func.func @resample_tables(%x: tensor<2x3xf32>, %i: tensor<6xi64>, %w: tensor<6xf32>) -> tensor<2x6xf32> {
  // expected-error@+1 {{index and weight need 12 entries each}}
  %0 = ds.resample %x, %i, %w {axes = array<i64: 1>, taps = array<i64: 2>} : (tensor<2x3xf32>, tensor<6xi64>, tensor<6xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// Axes increase.
func.func @resample_axes(%x: tensor<2x3xf32>, %i: tensor<10xi64>, %w: tensor<10xf32>) -> tensor<4x6xf32> {
  // expected-error@+1 {{axes must be increasing and in [0, 2)}}
  %0 = ds.resample %x, %i, %w {axes = array<i64: 1, 0>, taps = array<i64: 1, 1>} : (tensor<2x3xf32>, tensor<10xi64>, tensor<10xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// Other dimensions keep their size.
func.func @resample_other_dims(%x: tensor<2x3xf32>, %i: tensor<6xi64>, %w: tensor<6xf32>) -> tensor<4x6xf32> {
  // expected-error@+1 {{dimension 0 is not resampled but changes from 2 to 4}}
  %0 = ds.resample %x, %i, %w {axes = array<i64: 1>, taps = array<i64: 1>} : (tensor<2x3xf32>, tensor<6xi64>, tensor<6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}
