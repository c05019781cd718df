#!/usr/bin/env bash
# Regenerates docs/ from the TableGen sources (ops, dialect, passes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
cmake --build "$BUILD_DIR" --target mlir-doc
mkdir -p "$ROOT/docs"
cp "$BUILD_DIR"/docs/Rpe/*.md "$ROOT/docs/"
echo "docs/ updated from $BUILD_DIR/docs/Rpe"
