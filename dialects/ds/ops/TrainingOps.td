//===- TrainingOps.td - ds dialect ops ---*- tablegen -*-===//
//
// Part of DSOps.td (included from it, in this order: later families use
// the classes earlier ones define). This family's op facts are in
// TrainingOps.cpp beside this file.
//
//===----------------------------------------------------------------------===//
#ifndef DS_OPS_TRAINING_OPS_TD
#define DS_OPS_TRAINING_OPS_TD

//===----------------------------------------------------------------------===//
// Training: losses, gradients the autodiff pass emits, optimizer updates
//===----------------------------------------------------------------------===//

def DS_SoftmaxCrossEntropyOp : DS_Op<"softmax_cross_entropy", [Pure, DS_Differentiable],
                                      DS_OwnStep> {
  let summary = "mean cross entropy of softmax(logits) against class labels";
  let description = [{
    Classes are the last dimension of `logits`; `labels` has the other
    dimensions. The loss is the mean over labels not equal to
    `ignore_index` (torch.nn.CrossEntropyLoss, reduction "mean"); NaN when
    every label is ignored, as in PyTorch.

    **Constraints:**
    - `logits` has rank >= 1 and `labels` has shape `logits.shape[:-1]`.
    - the loss is a scalar of the logits' element type.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$labels,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs DS_FloatTensor:$loss);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_SoftmaxCrossEntropyGradOp : DS_Op<"softmax_cross_entropy_grad", [Pure], DS_OwnStep> {
  let summary = "gradient of softmax_cross_entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * dloss / count` on rows whose
    label is not ignored, zero on ignored rows. With a second result,
    `loss`, it is also `softmax_cross_entropy(logits, labels)` (the same
    value): the loss and its gradient from one pass over the logits,
    folded together by ds-fuse-softmax.

    **Constraints:**
    - `labels` has shape `logits.shape[:-1]`; `dloss` is a scalar.
    - the result has the logits' type; `loss` is a scalar of their element
      type.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$labels,
                   DS_FloatTensor:$dloss, DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs DS_FloatTensor:$result, Optional<DS_FloatTensor>:$loss);
  let assemblyFormat = "$logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_LayerNormGradOp : DS_Op<"layer_norm_grad", [Pure], DS_OwnStep> {
  let summary = "gradients of layer_norm: input, scale and bias";
  let description = [{
    Recomputes the statistics of `operand` and returns `d operand`,
    `d scale` and `d bias` for the output gradient `dy`. With an `addend`,
    `d operand` is `addend + d operand`: the residual stream's gradient a
    pre-norm transformer adds the norm's input gradient to, summed as the
    kernel writes it (folded in by ds-fuse-epilogues).

    **Constraints:**
    - the operand has rank >= 1 and `axis` is in [0, rank).
    - `scale` has shape `operand.shape[axis:]`; `dy` and `addend` have the
      operand's type.
    - results: the operand's type, then the scale's type twice.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$scale, DS_FloatTensor:$dy,
                   Optional<DS_FloatTensor>:$addend, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs DS_FloatTensor:$d_operand, DS_FloatTensor:$d_scale,
                  DS_FloatTensor:$d_bias);
  let assemblyFormat = [{
    $operand `,` $scale `,` $dy (`addend` $addend^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SoftmaxGradOp : DS_Op<"softmax_grad",
                             [Pure, AllTypesMatch<["softmax", "dy", "result"]>,
                              DS_OwnShardingRule], DS_OwnStep> {
  let summary = "gradient of softmax from its result: `y * (dy - sum(y * dy))`";
  let description = [{
    The input gradient of `y = softmax(x, axis)` for the output gradient
    `dy`, the sum taken along `axis`: one pass over each row where the
    elementwise form (a product, a reduction and a fused update) is three
    passes over the attention-sized scores. With an i1 `mask` (broadcast
    to `y`), the result is 0 where the mask is true: `where(mask, 0, ...)`,
    the gradient a `masked_fill` passes back, folded in by ds-fuse-softmax.

    **Constraints:**
    - `softmax`, `dy` and the result have one type of rank >= 1; `axis` is
      in [0, rank).
    - `mask`, if present, broadcasts to `softmax`'s shape.
  }];
  let arguments = (ins DS_FloatTensor:$softmax, DS_FloatTensor:$dy,
                   Optional<DS_BoolTensor>:$mask, I64Attr:$axis);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$softmax `,` $dy (`mask` $mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_GeluGradOp : DS_Op<"gelu_grad", [Pure, AllTypesMatch<["operand", "dy", "result"]>,
                                      DS_OwnShardingRule],
                         DS_OwnStep> {
  let summary = "dy * gelu'(x)";
  let description = [{
    **Constraints:**
    - `operand`, `dy` and the result have the same type.
  }];
  let arguments = (ins DS_FloatTensor:$operand, DS_FloatTensor:$dy,
                   DefaultValuedAttr<DS_GeluApproximationAttr,
                                     "GeluApproximation::None">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$operand `,` $dy attr-dict `:` type($result)";
}

def DS_GatherGradOp : DS_Op<"gather_grad", [Pure], DS_OwnStep> {
  let summary = "scatter-add of gathered gradients back to the data's shape";
  let description = [{
    The adjoint of `gather` (an embedding's weight gradient): a zero tensor
    of the result type into which each slice of `dy` is added at its index.
    Repeated indices accumulate; slices at `padding_idx` are left out.

    **Constraints:**
    - `axis` is in [0, rank of the result).
    - `dy` has shape `result[:axis] ++ indices.shape ++ result[axis+1:]` and
      the result's element type.
  }];
  let arguments = (ins DS_IndexTensor:$indices, DS_FloatTensor:$dy, I64Attr:$axis,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_InsertSliceOp : DS_Op<"insert_slice", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "a zero tensor with the operand written at a strided window";
  let description = [{
    The adjoint of `slice`: `result[starts + i * steps] = operand[i]`, zero
    elsewhere.

    **Constraints:**
    - `starts` and `steps` have one entry per dimension; steps are non-zero.
    - operand and result have the same rank and element type.
    - every index the operand lands on lies inside the result.
  }];
  let arguments = (ins DS_Tensor:$operand, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_AdamUpdateOp : DS_Op<"adam_update", [Pure, DS_OwnShardingRule, AttrSizedOperandSegments],
                             DS_OwnStep> {
  let summary = "one Adam/AdamW step of a parameter (the fused CPU-Adam kernel)";
  let description = [{
    With `g = grad * grad_scale` (the clipping coefficient): with
    `decoupled` (AdamW) `param *= 1 - lr * weight_decay`, else
    `g += weight_decay * param`; then `m = beta1 m + (1 - beta1) g`,
    `v = beta2 v + (1 - beta2) g^2`, and
    `param -= step_size * m / (sqrt(v) / bias2_sqrt + eps)`, where the
    runtime supplies `step_size = lr / (1 - beta1^t)` and
    `bias2_sqrt = sqrt(1 - beta2^t)` (torch.optim.AdamW's arithmetic).

    With `found_inf` given and not 0 (the gradients overflowed: their norm
    is inf or NaN) the step changes nothing: the results are the operands,
    as an overflowing fp16 step is skipped (DeepSpeed's loss scaler, torch's
    fused optimizers' `found_inf`) and a non-finite fp32 step is refused.

    With `beta1_now` given, the first moment's decay is that scalar instead
    of the `beta1` attribute: a schedule that cycles it (DeepSpeed's
    OneCycle), the runtime's `step_size` using the same value.

    **Constraints:**
    - `param`, `grad`, `m` and `v` have one type; the results are
      `param`, `m` and `v` of that type.
    - `lr`, `step_size`, `bias2_sqrt`, `grad_scale` and `found_inf` are f32
      scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$v, DS_FloatTensor:$lr, DS_FloatTensor:$step_size,
                   DS_FloatTensor:$bias2_sqrt, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf, Optional<DS_FloatTensor>:$beta1_now,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay,
                   BoolAttr:$decoupled);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m, DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step_size `,` $bias2_sqrt `,` $grad_scale
    (`found_inf` $found_inf^)? (`beta1` $beta1_now^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SgdUpdateOp : DS_Op<"sgd_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one SGD step with momentum (torch.optim.SGD)";
  let description = [{
    `d = grad * grad_scale + weight_decay * param`; with momentum
    `buf = first ? d : momentum buf + (1 - dampening) d` and
    `d = nesterov ? d + momentum buf : buf`; `param -= lr d`.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `buf` have one type; the results are `param` and
      `buf` of that type.
    - `lr`, `grad_scale`, `first` (1 on the first step) and `found_inf` are
      f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$buf,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale, DS_FloatTensor:$first,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$momentum, F64Attr:$dampening, BoolAttr:$nesterov,
                   F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr `,` $grad_scale `,` $first
    (`found_inf` $found_inf^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LambUpdateOp : DS_Op<"lamb_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one LAMB step of a whole parameter (DeepSpeed's FusedLamb)";
  let description = [{
    `g = grad * grad_scale`; `m = beta1 m + (1 - beta1) g`,
    `v = beta2 v + (1 - beta2) g^2`; `u = m / (sqrt(v) + eps) + weight_decay
    param` (`sqrt(v + eps)` with `eps_inside_sqrt`; the moments without
    bias correction); the trust ratio `c = clamp(|param| / |u|, min_coeff,
    max_coeff)` over the whole tensor (1 when either norm is 0); then
    `param -= step_size * bias2_sqrt * c * u`, where the runtime supplies
    `step_size = lr / (1 - beta1^t)` and `bias2_sqrt = sqrt(1 - beta2^t)`
    (both plain `lr` and 1 without bias correction).

    The norms are over the operand, so it must be the whole parameter: ZeRO
    partitions and tensor-parallel slices are refused before this op is built.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad`, `m` and `v` have one type; the results are `param`,
      `m` and `v` of that type.
    - `lr`, `step_size`, `bias2_sqrt`, `grad_scale` and `found_inf` are f32
      scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$v, DS_FloatTensor:$lr, DS_FloatTensor:$step_size,
                   DS_FloatTensor:$bias2_sqrt, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay,
                   F64Attr:$max_coeff, F64Attr:$min_coeff, BoolAttr:$eps_inside_sqrt);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m, DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step_size `,` $bias2_sqrt `,` $grad_scale
    (`found_inf` $found_inf^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_MuonUpdateOp : DS_Op<"muon_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Muon step of a whole weight matrix (DeepSpeed's MuonWithAuxAdam)";
  let description = [{
    Momentum orthogonalized by Newton-Schulz, as DeepSpeed 0.19's
    `muon_update`: `g = grad * grad_scale`; `buf = lerp(buf, g, 1 - momentum)`;
    `u = lerp(g, buf, momentum)` with `nesterov`, else `buf`; `O` is `u`
    orthogonalized by `ns_steps` quintic Newton-Schulz iterations
    (coefficients 3.4445, -4.7750, 2.0315; `X = u / (|u|_F + 1e-7)`, on the
    wide orientation: `A = X X^T`, `X = a X + (b A + c A A) X`), computed in
    f32; then `param = param (1 - lr weight_decay) - lr scale O`.

    The matrices: a rank-2 operand is one; rank 4 (a convolution's
    `[O, I, kh, kw]`) is `O x (I kh kw)`, as DeepSpeed views filters; other
    ranks are a batch of their last two dimensions. `scale` is DeepSpeed's
    `sqrt(max(1, rows / cols))` of the layer's `[out, in]` shape, which
    ds-build-train-step reads from how the model uses the weight (ONNX
    stores a MatMul weight as `[in, out]`).

    The norms are over the operand, so it must be the whole parameter: ZeRO
    partitions and tensor-parallel slices are refused before this op is built.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `buf` have one type, of rank >= 2; the results are
      `param` and `buf` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$buf,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$momentum, F64Attr:$weight_decay, BoolAttr:$nesterov,
                   I64Attr:$ns_steps, F64Attr:$scale);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LionUpdateOp : DS_Op<"lion_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Lion step (DeepSpeed's Lion: FusedLion, DeepSpeedCPULion)";
  let description = [{
    `g = grad * grad_scale`; `c = beta1 m + (1 - beta1) g`;
    `param = param (1 - lr weight_decay) - lr sign(c)` (a zero `c` moves
    by `-lr`, as DeepSpeedCPULion's `-copysign(lr, c)` does for +0);
    `m = beta2 m + (1 - beta2) g`. No bias correction, no epsilon.

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `m` have one type; the results are `param` and
      `m` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$m,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_AdagradUpdateOp : DS_Op<"adagrad_update", [Pure, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "one Adagrad step (torch.optim.Adagrad, DeepSpeedCPUAdagrad)";
  let description = [{
    `g = grad * grad_scale`; `d = g + weight_decay param`;
    `sum += d^2`; `param -= lr n / (sqrt(sum) + eps)` where `n` is `d`
    (torch.optim.Adagrad, what DeepSpeed runs on the device) or, with
    `decay_in_sum_only`, `g` (DeepSpeedCPUAdagrad, what it runs with the
    optimizer offloaded: the decay enters the accumulator only).

    `found_inf` as in `ds.adam_update`: not 0 leaves everything unchanged.

    **Constraints:**
    - `param`, `grad` and `sum` have one type; the results are `param` and
      `sum` of that type.
    - `lr`, `grad_scale` and `found_inf` are f32 scalars.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$sum,
                   DS_FloatTensor:$lr, DS_FloatTensor:$grad_scale,
                   Optional<DS_FloatTensor>:$found_inf,
                   F64Attr:$eps, F64Attr:$weight_decay, BoolAttr:$decay_in_sum_only);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_sum);
  let assemblyFormat = [{
    $param `,` $grad `,` $sum `,` $lr `,` $grad_scale (`found_inf` $found_inf^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Memory spaces: transfers the offload pass inserts (ZeRO-Offload)
//===----------------------------------------------------------------------===//

def DS_OffloadOp : DS_Op<"offload", [Pure, AllTypesMatch<["operand", "result"]>]> {
  let summary = "copies a device tensor to host memory";
  let description = [{
    Device to host: the result lives in host memory, where ops placed on
    the host (`ds.memory_space = #ds<memory_space host>`) read it. ZeRO-
    Offload moves each reduced gradient partition this way before the
    host accumulates it and the host optimizer updates with it. On the CPU
    backend host and device are separate pools of one memory (a copy); on
    CUDA it is a copy over PCIe.

    ```mlir
    %h = ds.offload %g : tensor<1024xf32>
    ```

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def DS_FetchOp : DS_Op<"fetch", [Pure, AllTypesMatch<["operand", "result"]>]> {
  let summary = "copies a host tensor to device memory";
  let description = [{
    Host to device: the inverse of `ds.offload`, e.g. the parameter
    partition the host optimizer updated, on its way to the all-gather.

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Recomputation (ds-recompute)
//===----------------------------------------------------------------------===//

def DS_OptimizationBarrierOp : DS_Op<"optimization_barrier",
    [AllTypesMatch<["operand", "result"]>, DS_OwnShardingRule], DS_OwnStep> {
  let summary = "the operand's value, as a value no pass may merge with it";
  let description = [{
    Returns its operand. It is not `Pure`: CSE never merges it or what is
    computed from it, so a forward segment ds-recompute copies into the
    backward (reading its checkpoint through a barrier) stays a second
    computation instead of folding back into the first, whose
    intermediates would then live through the backward again (StableHLO's
    `optimization_barrier` serves XLA's rematerialization the same way).
    The memory planner makes it a view of its operand; where it cannot
    (the operand is an input or a weight) it is a copy.

    ```mlir
    %h = ds.optimization_barrier %x : tensor<4x16x64xf32>
    ```

    **Constraints:**
    - operand and result have the same type.
  }];
  let arguments = (ins DS_Tensor:$operand);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

#endif // DS_OPS_TRAINING_OPS_TD
