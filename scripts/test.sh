#!/usr/bin/env bash
# Sets up, builds, and runs every test (lit suites and gtest units) via
# ctest, then a short sanitized fuzzing run of the runtime's parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
# A short fuzzing run of the runtime's parsers (plan loader, .npy/.npz,
# ds_config.json) under ASan + UBSan; fuzz/run.sh says why the importer's
# target only replays its corpus here (in ctest above).
echo "fuzzing: plan loader, .npy/.npz readers, ds_config.json reader, ONNX text/JSON readers, exporter-records recovery, 15 s each (log: build-fuzz/ci.log)"
mkdir -p build-fuzz
if ! bash fuzz/run.sh 15 plan npy npz config onnx-text torch-records > build-fuzz/ci.log 2>&1; then
  tail -n 60 build-fuzz/ci.log
  echo "fuzzing found a crash or failed to build (fuzz/crashes/, build-fuzz/ci.log)" >&2
  exit 1
fi
grep -E "^Done [0-9]+ runs" build-fuzz/ci.log
