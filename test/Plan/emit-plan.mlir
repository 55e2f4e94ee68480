// ds-opt writes a .dsplan from ds IR: the inference pipeline runs unless
// passes are given; ds-run --dump shows buffers and steps.
// RUN: rm -rf %t && mkdir -p %t
// RUN: ds-opt %s --disable-fusion=elementwise -o %t/p.dsplan
// RUN: ds-run %t/p.dsplan --dump | FileCheck %s
// RUN: ds-opt %s -o %t/f.dsplan
// RUN: ds-run %t/f.dsplan --dump | FileCheck %s --check-prefix=FUSED
// RUN: not ds-opt %s --canonicalize -o %t/q.dsplan 2>&1 | FileCheck %s --check-prefix=NOPLAN
// RUN: not ds-opt %s --emit=plan 2>&1 | FileCheck %s --check-prefix=STDOUT
// RUN: not ds-opt %s --emit=bytecode 2>&1 | FileCheck %s --check-prefix=EMIT

// CHECK: world size 1, arena 16 bytes, weights 16 bytes
// CHECK: %0    input  f32   4                "x"
// CHECK: %1    weight f32   4                @0 +16  ; w
// CHECK: %2    arena  f32   4                @0 +16
// CHECK: %3    output f32   4                "y"
// CHECK: %4    output f32   4                "y_again"
// CHECK: %5    output f32   4                "x_out"
// CHECK: %6    output f32   4                "w_out"
// CHECK: program forward(%0) -> (%3, %4, %5, %6):
// CHECK-NEXT: %2 = mul(%0, %1)
// CHECK-NEXT: %3 = exp(%2)
// A value returned twice, an input and a weight reach their outputs by copies.
// CHECK-NEXT: %4 = copy(%3)
// CHECK-NEXT: %5 = copy(%0)
// CHECK-NEXT: %6 = copy(%1)
// The default pipeline fuses mul and exp: one step with its register
// program (inputs %0 %1 are registers 0 1, mul writes 2, exp 3).
// FUSED: %2 = fused_elementwise(%0, %1) {args=[0,1,2], ops="mul,exp", result=3}
// FUSED-NEXT: %3 = copy(%2)
// NOPLAN: has no memory plan; run ds-plan-memory before emitting a plan
// STDOUT: a plan is binary: name the output with -o FILE.dsplan
// EMIT: --emit must be 'mlir' or 'plan', not 'bytecode'
func.func @main(%x: tensor<4xf32> {ds.name = "x"})
    -> (tensor<4xf32> {ds.name = "y"}, tensor<4xf32> {ds.name = "y_again"},
        tensor<4xf32> {ds.name = "x_out"}, tensor<4xf32> {ds.name = "w_out"}) {
  %w = ds.parameter "w" = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = ds.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = ds.exp %0 : tensor<4xf32>
  return %1, %1, %x, %w : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
