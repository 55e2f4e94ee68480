#!/usr/bin/env bash
# Fuzzes the plan loader, the .npy reader, the ds_config.json reader and the ONNX importer with libFuzzer + ASan + UBSan.
#   bash fuzz/run.sh [SECONDS_PER_TARGET]   (default 60)
# Builds with clang into build-fuzz/ (every library instrumented for
# coverage), works on a copy of fuzz/corpus/<target>/ in build-fuzz/, and
# writes any crash to fuzz/crashes/. A crash, once fixed, belongs in
# fuzz/corpus/ so ctest replays it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDS_BUILD_FUZZERS=ON -DDS_ENABLE_TESTS=OFF -DDS_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
fi
cmake --build build-fuzz --target ds-fuzz-plan-loader ds-fuzz-npy ds-fuzz-config ds-fuzz-onnx-importer
mkdir -p fuzz/crashes
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1
for target in plan npy config onnx; do
  work=build-fuzz/corpus-$target
  mkdir -p "$work"
  cp -n fuzz/corpus/$target/* "$work/"
  bin=build-fuzz/bin/ds-fuzz-plan-loader
  [ $target = onnx ] && bin=build-fuzz/bin/ds-fuzz-onnx-importer
  [ $target = config ] && bin=build-fuzz/bin/ds-fuzz-config
  [ $target = npy ] && bin=build-fuzz/bin/ds-fuzz-npy
  "$bin" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -timeout=10 \
    -artifact_prefix=fuzz/crashes/$target- "$work"
done
