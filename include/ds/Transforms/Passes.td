//===- Passes.td - tensor-level ds passes -------------------*- tablegen -*-===//
#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstantsPass : Pass<"ds-fold-constants", "ModuleOp"> {
  let summary = "evaluates ops whose operands are all constants";
  let description = [{
    Runs each ds op whose operands are all `ds.constant` on the runtime's
    CPU kernels and replaces it with a `ds.constant` of the result, so a
    folded value is exactly what ds-run would have computed. Parameters are
    never folded (they are trainable), and results larger than
    `max-elements` stay as ops so the IR does not balloon.

    ```mlir
    %a = ds.constant dense<[1, 2]> : tensor<2xi64>
    %b = ds.constant dense<[3, 4]> : tensor<2xi64>
    %c = ds.add %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
    ```
    becomes
    ```mlir
    %c = ds.constant dense<[4, 6]> : tensor<2xi64>
    ```
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"65536",
           "largest result (in elements) to fold">
  ];
  let statistics = [
    Statistic<"numFolded", "num-folded", "ops replaced by constants">
  ];
}

#endif // DS_TRANSFORMS_PASSES_TD
