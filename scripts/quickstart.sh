#!/usr/bin/env bash
# Sets up and builds ds, then the whole story on the bundled GPT-style model
# (exported by torch.onnx.export):
#  1. inference: compile to a plan, run it on the bundled input, compare
#     with the output PyTorch computed for the same input;
#  2. training as DeepSpeed would with examples/gpt/ds_config.json: ZeRO-2
#     on 2 ranks (mpirun), progress every steps_per_print steps, a
#     checkpoint, then the trained weights consolidated and exported as
#     ONNX, which ds compiles and runs again (its loss on the data is lower).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
EX=examples/gpt
mkdir -p build/example
echo "+ ds-opt $EX/tiny_gpt.onnx -o build/example/tiny_gpt.dsplan --report"
build/bin/ds-opt "$EX/tiny_gpt.onnx" -o build/example/tiny_gpt.dsplan --report
echo "+ ds-run build/example/tiny_gpt.dsplan --inputs $EX/input.npz --outputs build/example/output.npz"
build/bin/ds-run build/example/tiny_gpt.dsplan --inputs "$EX/input.npz" --outputs build/example/output.npz
/usr/bin/python3 - <<'PY'
import numpy as np
got = np.load("build/example/output.npz")["logits"]
ref = np.load("examples/gpt/expected.npz")["logits"]
err = np.abs(got - ref).max() / np.abs(ref).max()
print("logits %s, relative error vs PyTorch %.2e" % (got.shape, err))
raise SystemExit(0 if err < 1e-5 else 1)
PY

# ---- 2. training: ZeRO-2 on 2 ranks, checkpoint, export ------------------
W=build/example
/usr/bin/python3 - <<'PY'
import numpy as np
# Counting sequences (random start, stride 1-3): learnable next tokens.
rng = np.random.default_rng(0)
start, stride = rng.integers(0, 256, (256, 1)), rng.integers(1, 4, (256, 1))
seq = (start + stride * np.arange(33)[None, :]) % 256
np.savez("build/example/train.npz", input_ids=seq[:, :-1].astype(np.int64),
         labels=seq[:, 1:].astype(np.int64))
PY
RANKS=2
MPI=(mpirun --allow-run-as-root --oversubscribe -np "$RANKS")
command -v mpirun > /dev/null || { RANKS=1; MPI=(); echo "(no mpirun: training on 1 rank)"; }
echo "+ ds-opt $EX/tiny_gpt.onnx --config $EX/ds_config.json --world-size $RANKS --loss softmax-cross-entropy -o $W/train.dsplan"
build/bin/ds-opt "$EX/tiny_gpt.onnx" --config "$EX/ds_config.json" --world-size "$RANKS" \
  --loss softmax-cross-entropy -o "$W/train.dsplan"
rm -rf "$W/ckpt"
echo "+ ${MPI[*]} ds-run $W/train.dsplan --data $W/train.npz --steps 150 --checkpoint-dir $W/ckpt --log $W/train.jsonl"
"${MPI[@]}" build/bin/ds-run "$W/train.dsplan" --data "$W/train.npz" --steps 150 \
  --checkpoint-dir "$W/ckpt" --log "$W/train.jsonl" --progress lines
echo "+ ds-run $W/train.dsplan --checkpoint-dir $W/ckpt --zero-to-fp32 $W/weights.npz --export-onnx $W/trained.onnx"
build/bin/ds-run "$W/train.dsplan" --checkpoint-dir "$W/ckpt" --zero-to-fp32 "$W/weights.npz" \
  --export-onnx "$W/trained.onnx"
build/bin/ds-opt "$W/trained.onnx" -o "$W/trained.dsplan"
/usr/bin/python3 -c "import numpy as np; d = np.load('$W/train.npz'); np.savez('$W/batch.npz', input_ids=d['input_ids'][:2])"
build/bin/ds-run "$W/tiny_gpt.dsplan" --inputs "$W/batch.npz" --outputs "$W/before.npz"
build/bin/ds-run "$W/trained.dsplan" --inputs "$W/batch.npz" --outputs "$W/after.npz"
/usr/bin/python3 - <<'PY'
import json
import numpy as np
d = np.load("build/example/train.npz")
labels = d["labels"][:2]
def loss(path):
    z = np.load(path)["logits"].astype(np.float64)
    z -= z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, labels[..., None], -1).mean()
log = [json.loads(l) for l in open("build/example/train.jsonl")]
before, after = loss("build/example/before.npz"), loss("build/example/after.npz")
print("trained %d steps: loss %.3f -> %.3f (JSONL); the exported ONNX scores %.3f -> %.3f "
      "on a training batch" % (len(log), log[0]["loss"], log[-1]["loss"], before, after))
raise SystemExit(0 if after < before else 1)
PY
