func.func @main(%x: tensor<4x3xf32> {ds.name = "x"}) -> (tensor<4x2xf32> {ds.name = "y"}) {
  %w = ds.parameter "w" = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf32>
  %y = ds.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
