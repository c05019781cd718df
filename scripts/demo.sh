#!/usr/bin/env bash
# The main job: compile a Swin window-attention kernel and run it against
# the reference, printing results and timing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
if [[ -x "$ROOT/build/bin/swin-aot" && -f "$ROOT/python/examples/swin_block.py" ]]; then
  SWIN_AOT="$ROOT/build/bin/swin-aot" PYTHONPATH="$ROOT/python" \
    exec "$PYTHON" "$ROOT/python/examples/swin_block.py"
fi
echo "== rpe input: examples/window_attention.mlir"
cat "$ROOT/examples/window_attention.mlir"
echo "== after --rpe-cpu-pipeline, translated to LLVM IR (function signatures)"
"$ROOT/build/bin/swin-opt" "$ROOT/examples/window_attention.mlir" --rpe-cpu-pipeline |
  /usr/lib/llvm-22/bin/mlir-translate --mlir-to-llvmir | grep -E '^define'
