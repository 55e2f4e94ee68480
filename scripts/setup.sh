#!/usr/bin/env bash
# Installs ds's dependencies on Debian 12 (by package name), then configures
# and builds into ./build with CMake + Ninja (ccache when present).
# Safe to re-run: packages already present are not fetched again and the
# build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

# Why each dependency is here: docs/dependencies.md.
PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libprotobuf-dev protobuf-compiler libabsl-dev libonnx-dev
  libopenblas-dev libdnnl-dev zlib1g-dev libzip-dev
  libopenmpi-dev openmpi-bin liburing-dev
  libgtest-dev libbenchmark-dev clang libclang-rt-14-dev
  python3-onnx python3-numpy python3-torch python3-torchvision libonnx-testdata
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit is not a Debian package; when it is installed at
# /usr/local/cuda the CUDA backend is built too (DS_ENABLE_CUDA).
CMAKE_ARGS=(-G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release)
if [ -x /usr/local/cuda/bin/nvcc ]; then
  CMAKE_ARGS+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
fi
if [ ! -f build/build.ninja ]; then
  cmake "${CMAKE_ARGS[@]}"
fi
# Two cores: keep the job count at the core count.
cmake --build build -j "$(nproc)"

# The current onnx release's node tests (test/conformance/gen_node_tests.py):
# PyPI's onnx ships their generators but not their data, and Debian's
# python3-onnx (1.12) stops at opset 17. A pinned onnx in a git-ignored
# venv writes them once into build/onnx-node-tests.
ONNX_PIN=1.23.2
if [ "$(cat build/onnx-node-tests/ONNX_VERSION 2>/dev/null)" != "$ONNX_PIN" ]; then
  echo "setup: writing onnx $ONNX_PIN's node tests into build/onnx-node-tests"
  if [ ! -x build/onnx-venv/bin/python ]; then
    python3 -m venv build/onnx-venv
    build/onnx-venv/bin/pip install -q "onnx==$ONNX_PIN" "numpy==2.4.6"
  fi
  rm -rf build/onnx-node-tests
  build/onnx-venv/bin/python -W ignore test/conformance/gen_node_tests.py build/onnx-node-tests
fi
