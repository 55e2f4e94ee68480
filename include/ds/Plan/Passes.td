//===- Passes.td - plan-level passes ------------------------*- tablegen -*-===//
#ifndef DS_PLAN_PASSES_TD
#define DS_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanMemoryPass : Pass<"ds-plan-memory", "ModuleOp"> {
  let summary = "assigns every intermediate tensor a slot in a static arena";
  let description = [{
    Computes each intermediate's live range over the function's op order
    (definition to last use) and packs the intermediates into one arena
    with a best-fit-by-size placement: two intermediates share bytes only
    when their live ranges are disjoint. Constants and parameters live in
    the plan's weight section and function results in output buffers, so
    neither takes arena space.

    Input:
    ```mlir
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = ds.exp %x : tensor<4xf32>
      %1 = ds.exp %0 : tensor<4xf32>
      %2 = ds.exp %1 : tensor<4xf32>
      return %2 : tensor<4xf32>
    }
    ```
    Output: `%0` at offset 0 and `%1` at offset 64 (both live at `%1`'s
    definition); the function carries `ds.arena_bytes = 80`.
    ```mlir
    %0 = ds.exp %x {ds.arena_offsets = array<i64: 0>} : tensor<4xf32>
    ```

    A reshape, squeeze or unsqueeze of an arena intermediate whose result
    is an arena intermediate too is a *view*: it gets its operand's offset
    and `ds.arena_view`, the two share one live range, and the plan has a
    view buffer (`Buffer.alias_of`) instead of a copy step.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "byte alignment of every arena slot">,
    Option<"viewsEnabled", "views", "bool", /*default=*/"true",
           "place reshape-likes of arena values on their operand's bytes (no copy)">
  ];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "bytes of the static arena (peak of intermediates)">,
    Statistic<"naiveBytes", "naive-bytes", "bytes if every intermediate had its own slot">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // DS_PLAN_PASSES_TD
