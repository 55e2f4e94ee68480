#!/usr/bin/env bash
# The quantization benchmark's environment: PyTorch 2.x, onnxruntime,
# transformers from PyPI in bench/.venv (git-ignored; made once), then
# bench/quantization.py in it. Arguments go to quantization.py.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=bench/.venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/python" -c "import torch, onnxruntime, transformers, torchvision, onnx, onnxscript" 2>/dev/null ||
  "$VENV/bin/pip" install -q torch torchvision onnxruntime transformers onnx onnxscript numpy
exec "$VENV/bin/python" bench/quantization.py "$@"
