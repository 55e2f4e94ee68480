#!/usr/bin/env bash
# Sets up and builds ds, then compiles the bundled GPT-style model (exported
# by torch.onnx.export) to a plan, runs it on the bundled input, and
# compares with the output PyTorch computed for the same input.
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
