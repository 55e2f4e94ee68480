#!/usr/bin/env bash
# Builds and runs bench/gemm_blas.cpp. Optional libraries for the comparison:
#   apt-get install libblis-dev libdnnl-dev
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
g++ -O2 -std=c++17 gemm_blas.cpp -o "$out/gemm_blas" -ldl
OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 OMP_NUM_THREADS=1 DNNL_VERBOSE=0 "$out/gemm_blas"
rm -rf "$out"
