#!/usr/bin/env bash
# The generation benchmark's environment: PyTorch 2.x, transformers,
# onnxruntime-genai and tokenizers from PyPI in bench/.venv (git-ignored;
# made once), then bench/generation.py in it. Arguments go to generation.py.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=bench/.venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/python" -c "import torch, transformers, onnxruntime_genai, tokenizers, onnx, onnxscript" 2>/dev/null ||
  "$VENV/bin/pip" install -q torch transformers onnxruntime onnxruntime-genai tokenizers onnx onnxscript numpy
exec "$VENV/bin/python" bench/generation.py "$@"
