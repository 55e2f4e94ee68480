//===- Passes.td - tensor-level ds passes -------------------*- tablegen -*-===//
#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstantsPass : Pass<"ds-fold-constants", "ModuleOp"> {
  let summary = "evaluates ops whose operands are all constants";
  let description = [{
    Runs each ds op whose operands are all `ds.constant` on the runtime's
    CPU kernels and replaces it with a `ds.constant` of the result, so a
    folded value is exactly what ds-run would have computed. Results larger
    than `max-elements` stay as ops so the IR does not balloon, with one
    exception: slices, concatenations and transposes of constants or
    parameters that only such ops read (a weight rearranged by the
    exporter, as PyTorch reorders an LSTM's gates) fold at any size, since
    their inputs then die and the plan holds as many bytes as before. A
    training step's trained parameters are globals, never folded.

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

def ConvChannelsLastPass : Pass<"ds-conv-channels-last", "ModuleOp"> {
  let summary = "keeps inference convolutions' activations channels-last";
  let description = [{
    Gives every inference convolution (f32, 1-3 spatial dimensions, weights
    known before the run) `channels_last`, the layout oneDNN's CPU kernels
    compute in, with a `ds.transpose` into it before and out of it after.
    Transposes then move down through elementwise ops whose other operands
    are the same transposes, scalars or per-channel broadcasts (residual
    adds; a batch norm's scale [C, 1, 1] or a squeeze-excitation gate
    [N, C, 1, 1], reshaped to [1, 1, 1, C] / [N, 1, 1, C]), through f32
    poolings (which become `channels_last` too), concatenations (on the
    permuted axis), reductions that keep their dimensions (a global
    mean reduces the rows), splits and slices (on the permuted axis), and
    reshapes that split or merge whole dimensions (ShuffleNet's channel
    shuffle becomes one transpose of the channels-last tensor's last two
    dimensions; a merge that needs such a transpose is made only when what
    it leaves reaches a convolution's transpose), and a transpose out
    of one convolution meets the transpose into the next and cancels: the
    activations stay channels-last from the first convolution to the last,
    and the kernel reorders nothing. A transpose left that moves only unit
    dimensions is a `ds.reshape`. Training forwards are left alone (their
    weights are loaded state, and autodiff wants channels-first).

    ```mlir
    %a = ds.conv %x, %w1 {...} : (tensor<1x8x4x4xf32>, ...) -> tensor<1x8x4x4xf32>
    %b = ds.conv %a, %w2 {...} : (tensor<1x8x4x4xf32>, ...) -> tensor<1x8x4x4xf32>
    ```
    becomes
    ```mlir
    %t = ds.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : ...
    %a = ds.conv %t, %w1 {channels_last, ...} : (tensor<1x4x4x8xf32>, ...) -> tensor<1x4x4x8xf32>
    %b = ds.conv %a, %w2 {channels_last, ...} : (tensor<1x4x4x8xf32>, ...) -> tensor<1x4x4x8xf32>
    %y = ds.transpose %b {permutation = array<i64: 0, 3, 1, 2>} : ...
    ```
  }];
  let statistics = [
    Statistic<"numConvs", "num-convs", "convolutions made channels-last">
  ];
}

def HalfModelStatesPass : Pass<"ds-half-model-states", "ModuleOp"> {
  let summary = "16-bit parameters and gradients beside fp32 master weights (mixed-precision training)";
  let description = [{
    DeepSpeed's mixed-precision model states (ZeRO paper: 2Ψ + 2Ψ + 12Ψ
    bytes): the model computes with a 16-bit working copy of every trained
    parameter, its gradients are accumulated in 16 bits, and the optimizer
    keeps fp32 master weights beside its fp32 moments. Runs on a training
    module when its `ds.training` precision is bf16 or fp16, before
    `ds-data-parallel`, which then partitions the master weights from ZeRO
    stage 1 on, as it does the moments.

    For each trained parameter: `param:X` becomes the 16-bit copy (its
    initial value rounded to nearest even), `master:X` the fp32 weight
    (the export bindings now name it); every load of `param:X` outside the
    optimizer is followed by a cast to f32 (ds-mixed-precision gives
    products the 16-bit value itself); the optimizer updates `master:X` and
    stores the update, rounded, to `param:X`. `grad:X` becomes 16-bit
    unless `grad_accum_dtype` (DeepSpeed's `data_types.grad_accum_dtype`)
    is fp32: micro-steps add in f32 and round once per store; the optimizer
    reads it widened.

    ```mlir
    ml_program.global private mutable @"param:w"(dense<...> : tensor<4x4xf32>) : tensor<4x4xf32>
    ```
    becomes
    ```mlir
    ml_program.global private mutable @"param:w"(dense<...> : tensor<4x4xbf16>) : tensor<4x4xbf16>
    ml_program.global private mutable @"master:w"(dense<...> : tensor<4x4xf32>) : tensor<4x4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numParameters", "num-parameters", "parameters given a 16-bit working copy">,
    Statistic<"numGradients", "num-gradients", "gradient accumulators made 16-bit">
  ];
}

def MixedPrecisionPass : Pass<"ds-mixed-precision", "ModuleOp"> {
  let summary = "runs matrix products and convolutions in bf16 or fp16 with fp32 accumulation";
  let description = [{
    DeepSpeed's `bf16` / `fp16` modes (and DeepSpeed-Inference's `dtype`)
    as a compile-time decision per op: every f32 `ds.matmul`, `ds.conv` and
    `ds.conv_grad` (forward and backward products alike) reads its operands
    in the 16-bit type, sums in f32 inside the kernel and rounds its
    results to 16 bits, which is what `torch.autocast` does for
    `matmul`/`linear`/`conv`. Everything else —
    softmax, normalizations, losses, reductions, elementwise math, the
    gradient accumulators and the optimizer with its fp32 master weights
    and moments — stays f32: the result is cast back right after the
    product. A weight that is a `ds.parameter` (inference) is stored in
    16 bits instead of cast at run time, halving its bytes.

    With `comm-dtype` bf16 or fp16 (DeepSpeed's `communication_data_type`,
    which defaults to the training type), every sum `all_reduce` /
    `reduce_scatter` of a gradient tensor (rank >= 1: not the scalar loss
    or gradient norm) sends 16-bit values: cast before, back to f32 after,
    halving the bytes on the wire.

    ```mlir
    %y = ds.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    ```
    becomes
    ```mlir
    %a = ds.cast %x : tensor<8x16xf32> -> tensor<8x16xbf16>
    %w16 = ds.parameter "w" = dense<...> : tensor<16x4xbf16>
    %p = ds.matmul %a, %w16 : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
    %y = ds.cast %p : tensor<8x4xbf16> -> tensor<8x4xf32>
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "16-bit type of the products: bf16 or fp16 (fp32: leave them)">,
    Option<"commDtype", "comm-dtype", "std::string", /*default=*/"\"fp32\"",
           "type of data-parallel gradient reductions (communication_data_type)">
  ];
  let statistics = [
    Statistic<"numProducts", "num-products", "matrix products made 16-bit">,
    Statistic<"numWeights", "num-weights", "parameters stored in 16 bits">,
    Statistic<"numCollectives", "num-collectives", "gradient reductions made 16-bit">
  ];
}

def FuseElementwisePass : Pass<"ds-fuse-elementwise", "ModuleOp"> {
  let summary = "groups chains of elementwise ops into one ds.fused_elementwise";
  let description = [{
    Starting from the last op of a chain, takes in every elementwise
    producer (f32 and i1 values: arithmetic, comparisons, logic, select,
    casts between them, unary math, GELU) whose result has the chain's
    shape and is read only inside the chain; what the chain reads from
    outside (broadcast operands, scalars, the chain's inputs) become the
    fused op's inputs. A chain of two or more ops becomes one
    `ds.fused_elementwise` whose kernel evaluates the body tile by tile:
    GPT-2's tanh GELU (9 ops) reads its input once and writes its result
    once instead of 9 round trips through memory.

    ```mlir
    %t = ds.tanh %x : tensor<256x2048xf32>
    %y = ds.mul %t, %h : (tensor<256x2048xf32>, tensor<f32>) -> tensor<256x2048xf32>
    ```
    becomes
    ```mlir
    %y = ds.fused_elementwise %x, %h : (tensor<256x2048xf32>, tensor<f32>) -> tensor<256x2048xf32> {
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %0 = ds.tanh %a : tensor<f32>
      %1 = ds.mul %0, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
      ds.yield %1 : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "32", "largest chain fused into one op">,
    Option<"maxInputs", "max-inputs", "int64_t", "12", "most inputs a fused op may read">
  ];
  let statistics = [
    Statistic<"numChains", "num-chains", "fused ops made">,
    Statistic<"numOpsFused", "num-ops-fused", "elementwise ops moved into fused ops">
  ];
}

def FoldBatchNormPass : Pass<"ds-fold-batch-norm", "ModuleOp"> {
  let summary = "folds per-channel affine ops (inference BatchNorm) into the convolution";
  let description = [{
    An inference `BatchNormalization` after a convolution imports as a
    subtract, divide, multiply and add by per-channel constants: a map
    `y = a_c * conv + d_c` per output channel. When the convolution's
    weight (and bias, if any) are constants, the chain of such ops (each
    the only user of the one before; constants that are one value or vary
    along the channel dimension only) folds into a new weight
    `a_c * W[c]` and bias `a_c * b[c] + d_c` at compile time, computed in
    f64 and rounded once. Training plans read the weight from a global: no
    fold.

    ```mlir
    %c = ds.conv %x, %w ...
    %s = ds.sub %c, %mean ...     // [C, 1, 1] constants
    %n = ds.div %s, %std ...
    %g = ds.mul %n, %gamma ...
    %y = ds.add %g, %beta ...
    ```
    becomes `%y = ds.conv %x, %w_folded, %b_folded ...`.

    A normalization as the importer writes it (subtract, divide, multiply,
    add by per-channel constants) that follows anything else (before a
    convolution with a ReLU between: DenseNet's pre-activation) becomes one
    multiply and one add by [1, C, 1, ...] constants `a_c` and `d_c`: no
    division or statistics arithmetic at run time. Other chains stay as
    they are (reassociating them would change results where their
    intermediates cancel or overflow), and so does any chain whose folded
    map, or a weight it scales, is not finite in f32 (a zero variance with
    a zero epsilon: the unfolded ops give inf per element).
  }];
  let statistics = [
    Statistic<"numFolded", "num-folded", "convolutions given a folded normalization">,
    Statistic<"numSimplified", "num-simplified", "normalizations made one multiply and add">,
    Statistic<"numOpsFolded", "num-ops-folded", "per-channel ops folded">
  ];
}

def FuseEpiloguesPass : Pass<"ds-fuse-epilogues", "ModuleOp"> {
  let summary = "folds residual adds and activations into the convolution (or norm gradient) that produces them";
  let description = [{
    A `ds.add` of a value of the result's type (a residual) that is the
    only user of a `ds.conv` becomes the convolution's `addend`; then a
    `ds.relu`, or a `ds.max` / `ds.min` with a known scalar bound (a
    constant, or a one-element parameter that is not trained), that is the
    only user becomes its `clip_min` / `clip_max` (a clamp needs a lower
    bound: a NaN becomes it; a min then a max is one clamp), and the
    importer's HardSwish of the result its `activation = hard_swish`: the
    kernel adds, clamps and activates as it writes the result (oneDNN
    post-ops), so none costs a pass over memory (ResNet's `relu(conv(x) +
    identity)`, ReLU, Clip as PyTorch exports ReLU6, MobileNetV3's
    HardSwish). Runs after ds-conv-channels-last, which moves
    the layout transposes past the residual adds. Runs after autodiff: a
    training forward's convolution result is also read by the backward, so
    it has other users and stays.

    In training, a `ds.add` that is the only user of a
    `ds.layer_norm_grad`'s input gradient becomes that op's `addend`: a
    pre-norm transformer's backward adds each norm's input gradient to the
    residual stream's, one pass over memory fewer per norm.

    ```mlir
    %c = ds.conv %x, %w {...} : (...) -> tensor<1x4x8x8xf32>
    %y = ds.relu %c : tensor<1x4x8x8xf32>
    ```
    becomes
    ```mlir
    %y = ds.conv %x, %w {..., clip_min = 0.0 : f64} : (...) -> tensor<1x4x8x8xf32>
    ```
  }];
  let statistics = [
    Statistic<"numResiduals", "num-residuals", "residual adds folded into convolutions">,
    Statistic<"numFused", "num-fused", "activations folded into convolutions">,
    Statistic<"numNormResiduals", "num-norm-residuals",
              "residual adds folded into layer norm gradients">
  ];
}

def RaiseActivationsPass : Pass<"ds-raise-activations", "ModuleOp"> {
  let summary = "recognizes GELU written as elementwise ops and makes it one ds.gelu";
  let description = [{
    Exporters spell GELU out: PyTorch 2 writes Hugging Face's tanh GELU as
    nine ops (`0.5 * x * (1 + tanh(0.7978846 * (x + 0.044715 * x^3)))`)
    and the erf form as five. This pass finds, from each f32 value `x`,
    the elementwise ops that compute a function of `x` alone (their other
    operands known scalar constants, every intermediate read only inside),
    evaluates that function in double precision on 512 points of
    [-12, 12], and when it equals GELU's erf or tanh form within 2e-6
    (relative, at least 2e-6 absolute: f32 rounding of the exported
    constants) replaces the ops with one `ds.gelu`. Recognizing by value
    rather than by op pattern finds every way an exporter associates the
    terms; the two forms differ by up to 4.7e-4, far above the bound.
    `ds.gelu` then runs as one kernel, is a matmul epilogue
    (ds-fuse-matmul-epilogues) and, before autodiff (the training pipeline
    runs it first), has one gradient op. A one-element parameter named in
    `trained` (`ds-opt --parameters`) is not taken for a constant.

    ```mlir
    %h = ds.mul %x, %half ...   // ... 8 more ops ...
    %y = ds.mul %h, %t ...
    ```
    becomes
    ```mlir
    %y = ds.gelu %x {approximate = #ds.gelu_approximation<tanh>} : tensor<256x2048xf32>
    ```
  }];
  let options = [
    ListOption<"trained", "trained", "std::string",
               "one-element parameters that are trained, not constants">
  ];
  let statistics = [
    Statistic<"numRaised", "num-raised", "activations recognized">,
    Statistic<"numOpsReplaced", "num-ops-replaced", "elementwise ops they replaced">
  ];
}

def FuseNormsPass : Pass<"ds-fuse-norms", "ModuleOp"> {
  let summary = "makes RMSNorm written as elementwise ops and a mean one ds.rms_norm";
  let description = [{
    `mean(x * x)` over the last axis (kept), plus a known non-negative
    scalar epsilon, a square root, then `x * reciprocal(s)`, `x * (1 / s)`
    or `x / s`, and
    an optional multiply by an [N] scale, every intermediate read only by
    the next op, become `ds.rms_norm x, scale {epsilon}`: one pass per row
    instead of six over the activations (Llama's, Mistral's and T5's norm
    as PyTorch 2 exports it).

    ```mlir
    %q = ds.mul %x, %x ...
    %m = ds.reduce_mean %q {axes = array<i64: 2>} ...
    %e = ds.add %m, %eps ...
    %s = ds.sqrt %e ...
    %r = ds.reciprocal %s ...
    %n = ds.mul %x, %r ...
    %y = ds.mul %w, %n ...
    ```
    becomes
    ```mlir
    %y = ds.rms_norm %x, %w {epsilon = 1.0e-06 : f32} ...
    ```
  }];
  let statistics = [Statistic<"numFused", "num-fused", "RMSNorms fused">];
}

def FuseAttentionPass : Pass<"ds-fuse-attention", "ModuleOp"> {
  let summary = "makes scores, mask, softmax and weighted sum one ds.attention";
  let description = [{
    From each softmax over the last axis of a rank-4 f32 value: the
    product `q x k^T` before it (with multiplications or divisions by known
    scalars on either operand or on the scores: the scale), an optional
    additive mask, PyTorch 2's `where(isnan(p), 0, p)` after it, the
    product with `v`, and an optional transpose of the result to
    [B, S, H, Dv] (or to a layout with its bytes, such as
    nn.MultiheadAttention's [S, B, H, Dv] at batch 1, then reshaped). q, k and v are traced back through the transposes,
    reshapes and broadcasts that arranged them (grouped-query attention's
    head expansion included) and the split (or the selects: gathers of one
    constant index) that cut one q/k/v projection apart, to the tensors in
    memory, which the fused op reads through strided views (at an offset,
    for a piece); layout ops, splits and selects left without readers go.
    Every
    intermediate must be read only inside the match, so training plans
    (whose backward reads the probabilities) keep theirs.

    ```mlir
    %s = ds.matmul %q, %kt ...       // [B, H, Sq, D] x [B, H, D, Sk]
    %m = ds.add %s, %mask ...
    %p = ds.softmax %m {axis = 3 : i64} ...
    %o = ds.matmul %p, %v ...
    ```
    becomes
    ```mlir
    %o = ds.attention %qbase, %kbase, %vbase mask %mask {query_shape = ..., query_strides = ..., ...}
    ```
  }];
  let statistics = [
    Statistic<"numFused", "num-fused", "attentions fused">
  ];
}

def FuseSoftmaxPass : Pass<"ds-fuse-softmax", "ModuleOp"> {
  let summary = "folds a softmax's mask (masked_fill or additive) into it, the mask of its gradient, and a cross-entropy loss into its gradient";
  let description = [{
    A softmax over the last axis of `where(mask, fill, x)` (a known scalar
    fill: `masked_fill`; with the branches swapped, the mask negated) or of
    `x + mask` (an f32 mask broadcast to x), the masked value read only by
    the softmax, becomes `ds.masked_softmax x, mask`: the masked scores are
    built row by row and never written. A `where(mask, 0, g)` (or
    `where(mask, g, 0)`) of a `ds.softmax_grad` read only by it, which is
    the gradient a masked_fill passes back, becomes that softmax_grad's
    mask. Both are exact: the row kernels do the same arithmetic.
    ds-fuse-attention, before it, takes whole inference attentions; this
    pass matters for training, whose backward reads the probabilities.
    A training step's `ds.softmax_cross_entropy` and its gradient (the same
    logits, labels and ignore_index) become one
    `ds.softmax_cross_entropy_grad` with the loss as a second result: one
    pass over the logits (the vocabulary-wide ones of a language model)
    instead of two.

    ```mlir
    %m = ds.where %causal, %ninf, %s : (tensor<1x1x128x128xi1>, tensor<f32>, tensor<8x8x128x128xf32>) -> tensor<8x8x128x128xf32>
    %p = ds.softmax %m {axis = 3 : i64} : tensor<8x8x128x128xf32>
    ```
    becomes
    ```mlir
    %p = ds.masked_softmax %s, %causal {axis = 3 : i64, mask_fill = 0xFFF0000000000000 : f64} : ...
    ```
  }];
  let statistics = [
    Statistic<"numForward", "num-forward", "masks folded into softmaxes">,
    Statistic<"numBackward", "num-backward", "masks folded into softmax gradients">,
    Statistic<"numLoss", "num-loss", "cross-entropy losses computed by their gradient">
  ];
}

def FuseMatmulEpiloguesPass : Pass<"ds-fuse-matmul-epilogues", "ModuleOp"> {
  let summary = "folds scale, bias, activation and residual into the matrix product";
  let description = [{
    Follows each f32 `ds.matmul`'s result through the ops that only
    post-process it, in this order, each optional: a multiply or divide by
    a known scalar (`alpha`), an add of an [N] vector (the bias, N the last
    dimension), an activation (`ds.relu`, `ds.gelu`, `ds.sigmoid`,
    `ds.tanh`, `max(x, 0)`, `x * sigmoid(x)`), and an add or multiply with
    a value of the result's shape (a residual, a gate, or in training the
    gradient accumulator the product is added to), or a `ds.gelu_grad`
    whose `dy` is the product (an MLP's backward: the product times GELU's
    derivative at the forward's pre-activation). Reshapes that keep the
    last dimension may sit between them. Every intermediate must be read
    only by the next step. The ops become one `ds.fused_matmul`, whose
    kernel applies the epilogue to each block of the product while it is in
    cache (or as oneDNN post-ops), so none of them costs a pass over memory.
    An operand that is a multiply by a known scalar read only by products
    (the scaled gradient of attention scores) is read unscaled, the scalar
    going into each product's `alpha`.

    ```mlir
    %p = ds.matmul %x, %w : (tensor<256x512xf32>, tensor<512x2048xf32>) -> tensor<256x2048xf32>
    %b = ds.add %p, %bias : (tensor<256x2048xf32>, tensor<2048xf32>) -> tensor<256x2048xf32>
    %y = ds.gelu %b : tensor<256x2048xf32>
    ```
    becomes
    ```mlir
    %y = ds.fused_matmul %x, %w bias %bias {activation = #ds.activation<gelu>}
        : (tensor<256x512xf32>, tensor<512x2048xf32>, tensor<2048xf32>) -> tensor<256x2048xf32>
    ```
    Runs after autodiff: a training forward's pre-activation is also read
    by the backward, so there the product stores it as a second result
    (`pre_activation`) beside the activation it applies, when every other
    reader comes after the activation; the bias and residual adds and the
    gradient accumulation are folded too.

    Row epilogues (`row-epilogues`, on by default; `--disable-fusion=
    product-softmax` in ds-opt): a `ds.masked_softmax` or `ds.softmax` over
    the last axis of a product that is only scaled (attention's scores),
    or a `ds.softmax_grad` whose `dy` is the product (their backward), ends
    the chain: the fused product normalizes each block of rows as the GEMM
    stores it, with the same row kernels, so attention-sized scores make
    one trip through memory instead of three.
  }];
  let options = [
    Option<"rowEpilogues", "row-epilogues", "bool", /*default=*/"true",
           "fold softmaxes and softmax gradients over a product's rows into it">
  ];
  let statistics = [
    Statistic<"numFused", "num-fused", "products given an epilogue">,
    Statistic<"numOpsFused", "num-ops-fused", "ops folded into products">
  ];
}

def RaiseQuantizedMatmulPass : Pass<"ds-raise-quantized-matmul", "ModuleOp"> {
  let summary = "int8 products and convolutions of quantized models become ds.quantized_matmul and ds.quantized_conv";
  let description = [{
    onnxruntime's `quantize_dynamic` writes each product with a constant
    weight as DynamicQuantizeLinear on the activations, MatMulInteger with
    the int8 weight, a cast to float and a multiply by the two scales. The
    importer makes that `ds.dynamic_quantize`, integer subtracts and casts,
    an i32 `ds.matmul`, `ds.cast` and `ds.mul`; this pass finds the chain
    and makes it one `ds.quantized_matmul` with `dynamic_per_tensor`
    activations (the same uint8 values, scale and zero point), so the
    product runs on int8 dot products instead of an i32 GEMM.
    ds-fuse-matmul-epilogues then takes the bias, activation and residual
    that follow.

    ```mlir
    %q, %s, %z = ds.dynamic_quantize %x : ...
    %a = ds.sub (ds.cast %q), (ds.cast %z) : ... -> tensor<512x256xi32>
    %p = ds.matmul %a, %w : (tensor<512x256xi32>, tensor<256x1024xi32>) -> tensor<512x1024xi32>
    %y = ds.mul (ds.cast %p), (ds.mul %s, %ws) : ... -> tensor<512x1024xf32>
    ```
    becomes
    ```mlir
    %y = ds.quantized_matmul %x, %wT, %scales {activation_quant = #ds<activation_quant dynamic_per_tensor>, bits = 8 : i64}
        : (tensor<512x256xf32>, tensor<1024x256xi8>, tensor<1024xf32>) -> tensor<512x1024xf32>
    ```

    The weight (after its zero point is taken off) must fit int8 and be a
    known constant, the weight scale a scalar or one per output column;
    chains that differ stay as they are.

    QDQ models (onnxruntime's `quantize_static`; QLinearMatMul and
    QLinearConv, which the importer spells the same way) multiply
    `DequantizeLinear(QuantizeLinear(x))` by a dequantized int8 weight.
    A `ds.matmul` or `ds.conv` whose left operand is
    `(cast(q) - zero_point) * scale` (one scale and zero point) and whose
    weight is int8 values times per-channel scales (zero points 0 for a
    convolution, and for the activations to be integers in a product)
    becomes `ds.quantized_matmul` with `static_per_tensor` activations or
    `ds.quantized_conv`. When `q` is QuantizeLinear of an f32 `x` with the
    same scale and zero point the op reads `x` and rounds it itself (the
    same integers); otherwise it reads the centered integers as floats with
    scale 1, the activation scale folded into the weight's.

    ```mlir
    %q = ds.cast (ds.min (ds.max (ds.add (ds.round (ds.div %x, %s)), %z), %lo), %hi) : ... -> tensor<1x64x56x56xui8>
    %a = ds.mul (ds.sub (ds.cast %q), %z), %s : ... -> tensor<1x64x56x56xf32>
    %y = ds.conv %a, (ds.mul %wscale, %wq), %b {...}
    ```
    becomes
    ```mlir
    %y = ds.quantized_conv %x, %w, %scales bias %b {input_scale = ..., input_zero_point = ..., ...}
        : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xi8>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let statistics = [
    Statistic<"numRaised", "num-raised", "integer products raised">
  ];
}

def KeepActivationsQuantizedPass : Pass<"ds-keep-activations-quantized", "ModuleOp"> {
  let summary = "quantized convolutions hand uint8 activations to the quantized convolutions that read them";
  let description = [{
    A `ds.quantized_conv` whose every reader is another
    `ds.quantized_conv` rounding it to uint8 with one scale and zero point
    (a QDQ model's QuantizeLinear between two convolutions) writes those
    uint8 values itself (`output_scale`, `output_zero_point`, a ui8
    result, rounded as its result is stored) and its readers take them as
    they are: the activations between the layers are a quarter of the
    bytes, and the readers skip their rounding pass. A convolution with a
    reader that needs the f32 values (a residual add, a pooling) keeps its
    f32 result.

    ```mlir
    %a = ds.quantized_conv %x, %w1, %s1 {...} : (...) -> tensor<1x56x56x64xf32>
    %b = ds.quantized_conv %a, %w2, %s2 {input_scale = 0.02 : f64, input_zero_point = 0 : i64, ...}
    ```
    becomes
    ```mlir
    %a = ds.quantized_conv %x, %w1, %s1 {output_scale = 0.02 : f64, output_zero_point = 0 : i64, ...} : (...) -> tensor<1x56x56x64xui8>
    %b = ds.quantized_conv %a, %w2, %s2 {input_scale = 0.02 : f64, input_zero_point = 0 : i64, ...}
    ```
  }];
  let statistics = [
    Statistic<"numKept", "num-kept", "convolutions that write uint8 activations">
  ];
}

def QuantizePass : Pass<"ds-quantize", "ModuleOp"> {
  let summary = "quantizes products with constant weights to int8 or int4";
  let description = [{
    Each `ds.matmul` and `ds.fused_matmul` whose right operand is a
    constant 2-D f32 weight (an inference plan's projection) becomes a
    `ds.quantized_matmul` carrying its epilogue, the weight quantized once
    here, per output channel (or per `group-size` values of K), symmetric:

    - `int8-dynamic`: int8 weights, each activation row quantized to int8
      at run time (`dynamic_per_row`): the product runs on the CPU's int8
      dot products;
    - `int8-weight`: int8 weights, f32 activations (weight-only);
    - `int4-weight`: int4 weights in groups of `group-size` (default 128,
      ZeroQuant's group-wise int4), f32 activations: a weight takes an
      eighth of its f32 bytes plus a scale per group;
    - `int4-dynamic`: those int4 weights with each activation row
      quantized to int8 at run time (ZeroQuant's W4A8, onnxruntime-genai's
      int4 `accuracy_level` 4): decode runs on int8 dot products.

    Products it leaves: those whose weight is a value or a view, row
    epilogues (attention's softmax), gradients, and those named by `skip`
    (a substring of the weight's name or the node's location) or by
    `keep-first` / `keep-last` (the first and last quantizable product of
    each function: the first layer and the LM head, commonly kept in full
    precision).

    ```mlir
    %y = ds.fused_matmul %x, %w bias %b : (tensor<8x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    ```
    becomes (int8-dynamic)
    ```mlir
    %q = ds.constant dense<...> : tensor<3072x768xi8>
    %s = ds.constant dense<...> : tensor<3072xf32>
    %y = ds.quantized_matmul %x, %q, %s bias %b {activation_quant = #ds<activation_quant dynamic_per_row>, bits = 8 : i64}
        : (tensor<8x768xf32>, tensor<3072x768xi8>, tensor<3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    ```
  }];
  let options = [
    Option<"scheme", "scheme", "std::string", /*default=*/"\"int8-dynamic\"",
           "int8-dynamic, int8-weight, int4-weight or int4-dynamic">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"-1",
           "values of K per scale (0: one per output channel; default: 128 for int4, 0 for int8)">,
    ListOption<"skip", "skip", "std::string",
               "leave products whose weight name or location contains one of these">,
    Option<"keepFirst", "keep-first", "bool", /*default=*/"false",
           "leave each function's first quantizable product in f32">,
    Option<"keepLast", "keep-last", "bool", /*default=*/"false",
           "leave each function's last quantizable product in f32 (an LM head)">
  ];
  let statistics = [
    Statistic<"numQuantized", "num-quantized", "products quantized">,
    Statistic<"bytesSaved", "bytes-saved", "weight bytes saved">
  ];
}

def FoldMatmulLayoutsPass : Pass<"ds-fold-matmul-layouts", "ModuleOp"> {
  let summary = "reads transposed operands and writes transposed results of products in place";
  let description = [{
    Attention splits heads out of [B, T, H*D] activations with a reshape
    and a transpose to [B, H, T, D] (or [B, H, D, T] for keys) before its
    batched products, and merges them back with the inverse transpose
    after; training's backward does the same for every gradient. Each of
    those transposes copies a whole activation. This pass reads an f32
    product's operand through the transposes and reshapes that make it (a
    strided view, StridedView.h) and writes a product whose only reader is
    a transpose straight into that transpose's layout, as a
    `ds.fused_matmul` with `lhs_*` / `rhs_*` / `result_*` views. Pieces of
    a `ds.split` (a fused QKV projection's query, key and value) are read
    at their offset in the split's operand. Transposes and splits nothing
    else reads disappear. A view the GEMM cannot read (no unit
    stride in its last two dimensions, rows that overlap) leaves the
    operand as it was.

    ```mlir
    %r = ds.reshape %x : (tensor<8x128x256xf32>) -> tensor<8x128x8x32xf32>
    %q = ds.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : ... -> tensor<8x8x128x32xf32>
    %s = ds.matmul %q, %k ...
    ```
    becomes
    ```mlir
    %r = ds.reshape %x : (tensor<8x128x256xf32>) -> tensor<8x128x8x32xf32>
    %s = ds.fused_matmul %r, %k {lhs_shape = array<i64: 8, 8, 128, 32>,
        lhs_strides = array<i64: 32768, 32, 256, 1>} ...
    ```
    Runs after ds-fuse-matmul-epilogues, so that products keep their
    epilogues; disabled with `--disable-fusion=layouts`.
  }];
  let statistics = [
    Statistic<"numOperands", "num-operands", "operands read through a view">,
    Statistic<"numResults", "num-results", "results written through a view">
  ];
}

def FuseOptimizerPass : Pass<"ds-fuse-optimizer", "ModuleOp"> {
  let summary = "one pass over the gradients for the norm, zero fills written in place";
  let description = [{
    In the optimizer step: an add tree of `reduce_sum(g * g)` terms over
    every axis of f32 gradients (the squared norm clip_grad_norm_ takes,
    per parameter or per ZeRO block) becomes one `ds.sum_squares` over all
    of them, which reads each gradient once and in one kernel; and a
    `ds.fill` stored to several globals (CSE merges the zero fills that
    restart the gradient accumulators) is cloned per store, so each fill
    writes its accumulator in place instead of being copied into it. With
    the update kernels reading each gradient once, every gradient buffer is
    read twice and written once per optimizer step.

    ```mlir
    %a = ds.mul %g0, %g0 ...
    %s0 = ds.reduce_sum %a {axes = array<i64: 0, 1>} ...
    %b = ds.mul %g1, %g1 ...
    %s1 = ds.reduce_sum %b {axes = array<i64: 0>} ...
    %t = ds.add %s0, %s1 ...
    ```
    becomes
    ```mlir
    %t = ds.sum_squares %g0, %g1 : (tensor<256x768xf32>, tensor<768xf32>) -> tensor<f32>
    ```
  }];
  let dependentDialects = ["ml_program::MLProgramDialect"];
  let statistics = [
    Statistic<"numNorms", "num-norms", "sums of squares fused">,
    Statistic<"numTerms", "num-terms", "tensors in them">,
    Statistic<"numFills", "num-fills", "zero fills cloned per accumulator">
  ];
}

def BuildTrainStepPass : Pass<"ds-build-train-step", "ModuleOp"> {
  let summary = "builds the training step and the optimizer step from @main";
  let description = [{
    Turns an inference module into a training module, deciding at compile
    time what a DeepSpeed engine does at run time:

    - trainable parameters (`ds.parameter`, unless frozen) become mutable
      `ml_program.global`s `param:<name>`, read with `global_load`; an
      initializer that repeats another's random values (or their
      transpose) is the same parameter, tied, because exporters write tied
      weights (a GPT head tied to its embedding) as separate copies;
    - parameters the loss does not reach differentiably (buffers such as
      attention masks) keep their values and get no optimizer state;
    - `@train_step(inputs..., labels) -> loss` is `@main` plus the loss,
      reverse-mode gradients of the loss scaled by
      1/gradient_accumulation_steps (DeepSpeed scales the loss the same
      way), accumulated into zero-initialized globals `grad:<name>`;
    - `@optimizer_step` computes the global gradient norm, the clipping
      coefficient (`gradient_clipping`), applies the fused Adam/AdamW/SGD
      update to each parameter and its moments (`adam_m:`, `adam_v:`,
      `momentum:` globals), zeroes the gradients, and returns the norm.

    The DeepSpeed config (`config`) gives batch sizes, optimizer and
    schedule; they are recorded in the module's `ds.training` attribute for
    the plan. `@main` stays the inference forward, now reading the trained
    parameters.
  }];
  let options = [
    Option<"configPath", "config", "std::string", /*default=*/"\"\"",
           "DeepSpeed config (ds_config.json); empty: AdamW defaults, micro batch from the model">,
    ListOption<"overrides", "set", "std::string",
               "KEY=VALUE overrides of the config's keys (ds-opt --set)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "ranks; DeepSpeed's batch arithmetic counts the data-parallel ones (world / tp)">,
    Option<"tensorParallel", "tensor-parallel", "int64_t", /*default=*/"0",
           "tensor-parallel ranks per replica (0: the config's tensor_parallel.autotp_size, "
           "else 1)">,
    Option<"lossKind", "loss", "std::string", /*default=*/"\"softmax-cross-entropy\"",
           "softmax-cross-entropy, mse, or graph (the output named by loss-output is the loss)">,
    Option<"labelsName", "labels", "std::string", /*default=*/"\"labels\"",
           "name of the labels input added to @train_step">,
    Option<"lossOutput", "loss-output", "std::string", /*default=*/"\"\"",
           "model output the loss is computed on (default: the first)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "label value softmax-cross-entropy ignores">,
    ListOption<"frozen", "freeze", "std::string", "parameters that are not trained">,
    ListOption<"trainOnly", "parameters", "std::string",
               "train exactly these initializers (and copies holding their values); empty: "
               "every float initializer with more than one element">,
    Option<"tieWeights", "tie-weights", "bool", /*default=*/"true",
           "train initializers that hold the same random values (or their transpose) as one "
           "parameter: exporters duplicate tied weights such as a GPT head">,
    ListOption<"gradInputs", "grad-inputs", "std::string",
               "graph inputs whose gradients @train_step also returns (grad:<name>)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::ml_program::MLProgramDialect"];
}

def RecomputePass : Pass<"ds-recompute", "ModuleOp"> {
  let summary = "activation checkpointing: recompute forward segments in the backward";
  let description = [{
    Trades compute for activation memory, as DeepSpeed's (and Megatron's,
    and `torch.utils.checkpoint`'s) activation checkpointing does, but
    decided on the whole training step instead of around the modules a
    user wrapped. The forward of `@train_step` (up to the op marked
    `ds.loss`) is cut at *checkpoints*: values every later forward op
    reaches only through them (the residual stream between layers). Data
    that does not depend on a parameter (masks, position tables) and
    parameters themselves do not count as crossing. Each forward segment
    between two checkpoints is copied into the backward, right before the
    first backward op that reads one of its values, reading its checkpoint
    through `ds.optimization_barrier` so CSE cannot merge the copy back;
    the backward reads the copy, and the segment's own values die at the
    end of the forward. The segment after the last checkpoint (the head
    and the loss) is not recomputed: the backward starts with it.

    Policies: `layers` puts a checkpoint at the output of each layer
    (the ONNX node names' numbered module, `/h.3/`, `/layers.3/`), or at
    `checkpoints` of them spread evenly; `sqrt` (Chen et al. 2016) puts
    sqrt(n) checkpoints among the n possible ones, evenly by the bytes
    the backward reads; `budget` recomputes the fewest layers (the first
    ones first, Megatron's "block" method) whose estimated activation peak
    fits `budget` bytes. `cpu` keeps checkpoints in host memory between
    forward and backward (`ds.offload` / `ds.fetch`, DeepSpeed's
    cpu_checkpointing). `partition` (DeepSpeed's partition_activations)
    keeps each checkpoint split over the mesh's `tp` axis (a `ds.shard`
    constraint where it is made, a replicated one before its
    recomputation: one all-gather per segment) when the module is
    tensor-parallel. Empty options take the module's `ds.training`
    (DeepSpeed's activation_checkpointing section); without one the pass
    does nothing.

    The module's `ds.recompute` attribute records what was chosen for
    `--report`: checkpoints, their bytes, recomputed ops and the matrix
    product flops the recomputation adds to the step.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "none, layers, sqrt or budget (empty: layers when the config has an "
           "activation_checkpointing section, else none)">,
    Option<"checkpoints", "checkpoints", "int64_t", /*default=*/"-1",
           "layers: how many layer outputs to keep (-1: the config's number_checkpoints, "
           "else every layer's)">,
    Option<"budget", "budget", "int64_t", /*default=*/"-1",
           "budget: the activation bytes to fit (estimated before fusion)">,
    Option<"partition", "partition", "int64_t", /*default=*/"-1",
           "1: each checkpoint split over the tensor-parallel ranks between forward and "
           "backward, gathered before its recomputation (partition_activations), 0: kept "
           "whole, -1: the config's">,
    Option<"cpu", "cpu", "int64_t", /*default=*/"-1",
           "1: checkpoints in host memory (cpu_checkpointing), 0: on the device, "
           "-1: the config's">
  ];
  let statistics = [
    Statistic<"numCheckpoints", "num-checkpoints", "checkpoints kept">,
    Statistic<"numRecomputed", "num-recomputed", "forward ops copied into the backward">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

#endif // DS_TRANSFORMS_PASSES_TD
