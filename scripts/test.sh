#!/usr/bin/env bash
# Sets up, builds, and runs every test (lit suites and gtest units) via ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure -j "$(nproc)"
