// The loss is finite, p's gradient is NaN: where() picks the matmul, and
// the untaken sqrt of a negative p has gradient 0 / (2 sqrt(p)) = NaN.
func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x2xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %p = ds.parameter "p" = dense<[-1.0, -2.0]> : tensor<2xf32>
  %t = ds.constant dense<true> : tensor<4x2xi1>
  %m = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %s = ds.sqrt %p : tensor<2xf32>
  %y = ds.where %t, %m, %s : (tensor<4x2xi1>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
