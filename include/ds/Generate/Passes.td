//===- Passes.td - generation passes ------------------------*- tablegen -*-===//
#ifndef DS_GENERATE_PASSES_TD
#define DS_GENERATE_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeriveGenerationPass : Pass<"ds-derive-generation", "ModuleOp"> {
  let summary = "derives prefill and one-token decode programs with a KV cache from a causal LM";
  let description = [{
    From `@main`, a causal language model's forward pass over token ids
    `[B, M]` (M the longest sequence to generate, `--max-tokens`) with its
    attention fused (`ds.attention` with a causal mask), derives the two
    programs a generation loop runs:

    - `@prefill`: a chunk of `chunk` tokens per row of the batch;
    - `@decode`: one token per row.

    Both take the chunk's `input_ids [B, T]` and, per row, `positions`
    (where the chunk starts in its sequence), `lengths` (how many of its T
    tokens are real; 0 leaves the row idle) and `slots` (the cache row its
    sequence lives in), and return `logits [B, V]`: the next-token logits
    after each row's last real token. The LM head runs on that one row.

    The pass follows the sequence dimension (and the batch dimension) of
    every value from the token ids through reshapes, transposes, products,
    norms and elementwise ops, and changes its extent from M to T. A
    constant operand that varies along the sequence (position embeddings,
    RoPE's cos/sin, whatever the exporter folded them into) is evaluated
    once for all M positions and gathered at each row's positions. Each
    causal `ds.attention` becomes a `ds.cached_attention` appending to a
    key and a value cache, `ml_program` globals `kv.<n>.key` ([B, Hkv,
    M / 16, D, 16]: keys in tiles of 16, transposed) and `kv.<n>.value`
    ([B, Hkv, M, D]; M rounded up to whole tiles) shared by both programs (a sliding-window mask keeps
    its window). An op that mixes positions any other way (a cumulative
    sum, a product over the sequence, a mask that is not causal, a
    position-dependent bias) is an error naming the node: the model is not
    a causal LM this pass can step.

    ```mlir
    func.func @main(%ids: tensor<1x2048xi64>) -> tensor<1x2048x32000xf32>
    ```
    becomes
    ```mlir
    ml_program.global private mutable @kv.0.key(dense<0.0> : tensor<1x4x128x64x16xf32>) : ...
    func.func @prefill(%ids: tensor<1x128xi64>, %positions: tensor<1xi64>,
                       %lengths: tensor<1xi64>, %slots: tensor<1xi64>) -> tensor<1x32000xf32>
    func.func @decode(%ids: tensor<1x1xi64>, %positions: tensor<1xi64>,
                      %lengths: tensor<1xi64>, %slots: tensor<1xi64>) -> tensor<1x32000xf32>
    ```
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"128",
           "tokens per row in a prefill step (at most the sequence length)">
  ];
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
}

#endif // DS_GENERATE_PASSES_TD
