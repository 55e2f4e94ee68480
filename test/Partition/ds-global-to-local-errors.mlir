// ds-global-to-local rejects a split that does not divide, naming where.
// RUN: ds-opt %s --ds-global-to-local -verify-diagnostics

module attributes {ds.mesh = #ds.mesh<[<"tp" = 2>]>} {
  // expected-error@+1 {{a split of 'tensor<3x8xf32>' does not divide over its mesh axes}}
  func.func @odd(%x: tensor<3x8xf32> {ds.sharding = #ds.sharding<[["tp"], []]>}) -> tensor<3x8xf32> {
    return %x : tensor<3x8xf32>
  }
}
