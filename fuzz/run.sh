#!/usr/bin/env bash
# Fuzzes the plan loader, the .npy and .npz readers, the ds_config.json
# reader, the ONNX text/JSON readers, the exporter-records recovery and the
# ONNX importer with libFuzzer + ASan + UBSan.
#   bash fuzz/run.sh [SECONDS_PER_TARGET [TARGET...]]
#   (default 60, all of plan npy npz config onnx-text torch-records onnx)
# CI runs every target but onnx for a short while (scripts/test.sh): the
# importer's instrumented build is the whole compiler (~25 min on 2 cores),
# too long beside the main build; its corpus replays in ctest.
# Builds with clang into build-fuzz/ (every library instrumented for
# coverage), works on a copy of fuzz/corpus/<target>/ in build-fuzz/, and
# writes any crash to fuzz/crashes/. A crash, once fixed, belongs in
# fuzz/corpus/ so ctest replays it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(plan npy npz config onnx-text torch-records onnx)
declare -A BINARY=([plan]=ds-fuzz-plan-loader [npy]=ds-fuzz-npy [npz]=ds-fuzz-npz
                   [config]=ds-fuzz-config [onnx-text]=ds-fuzz-onnx-text
                   [torch-records]=ds-fuzz-torch-records [onnx]=ds-fuzz-onnx-importer)
declare -A CORPUS=([torch-records]=onnx)
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDS_BUILD_FUZZERS=ON -DDS_ENABLE_TESTS=OFF -DDS_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
fi
BUILD=()
for target in "${TARGETS[@]}"; do
  [ -n "${BINARY[$target]:-}" ] || { echo "fuzz/run.sh: unknown target '$target' (${!BINARY[*]})" >&2; exit 2; }
  BUILD+=("${BINARY[$target]}")
done
cmake --build build-fuzz --target "${BUILD[@]}"
mkdir -p fuzz/crashes
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1
for target in "${TARGETS[@]}"; do
  work=build-fuzz/corpus-$target
  mkdir -p "$work"
  cp -n fuzz/corpus/${CORPUS[$target]:-$target}/* "$work/"
  # A crash, a sanitizer report or a timeout makes libFuzzer exit non-zero, and so this script.
  "build-fuzz/bin/${BINARY[$target]}" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 \
    -timeout=10 -artifact_prefix=fuzz/crashes/$target- "$work"
done
