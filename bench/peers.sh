#!/usr/bin/env bash
# The peer benchmark's environment: PyTorch 2.x, onnxruntime, transformers,
# torchvision and DeepSpeed from PyPI in bench/.venv (git-ignored; made
# once), then bench/peers.py in it. Arguments go to peers.py. (DeepSpeed's
# NVMe offload, in bench/offload_training.py, also needs Debian's
# libaio-dev for its async_io op.)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=bench/.venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/python" -c "import torch, onnxruntime, transformers, torchvision, onnx, onnxscript, deepspeed" 2>/dev/null ||
  "$VENV/bin/pip" install -q torch torchvision onnxruntime transformers onnx onnxscript numpy \
    deepspeed ninja py-cpuinfo
exec "$VENV/bin/python" bench/peers.py "$@"
