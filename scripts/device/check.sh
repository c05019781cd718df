#!/bin/bash
# On a GPU machine without LLVM/MLIR 22 (the lent device machine): the GPU
# tests (the kernels', then PyTorch on CUDA), the GPU benchmark, the model-level
# figures and the CPU kernels built for its CPU, from the swin-aot outputs
# that scripts/device/record.py recorded into STORE.
#
#   scripts/device/check.sh STORE [OUT]     (OUT: where the logs go)
set -u
cd "$(dirname "$0")/../.."
store=$(realpath "$1"); out=${2:-/tmp/device-check}; mkdir -p "$out"
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
lscpu | grep -E "^Model name|^CPU\(s\)"
export AOT_REPLAY_STORE=$store SWIN_AOT=$PWD/scripts/device/aot-replay.py \
       SWIN_OPT_CACHE_DIR=/tmp/swin-device-cache PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
       SWIN_REQUIRE_AOT=1
echo "== GPU tests"
timeout -k 5 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu.py 2>&1 |
  tee "$out/gpu-tests.log" | tail -30
echo "== PyTorch on CUDA: the operators' CUDA implementations, swapped models"
# (not the checks against this CPU's "native" kernels: those recorded are the recording machine's)
timeout -k 5 300 python3 -m pytest -q -rs -p no:cacheprovider -k "not cpu_kernel" \
  python/tests/test_torch_cuda.py 2>&1 | tee "$out/torch-cuda-tests.log" | tail -30
for dtype in f16 bf16 f32; do
  echo "== GPU benchmark, $dtype"
  timeout -k 5 100 python3 bench/gpu_bench.py --dtype $dtype 2>&1 | tee "$out/gpu-bench-$dtype.log"
done
echo "== GPU training step, f16: our forward and backward against SDPA and FlexAttention with a learnable table"
timeout -k 5 150 python3 bench/gpu_bench.py --backward --dtype f16 2>&1 | tee "$out/gpu-bench-backward-f16.log"
echo "== swin_tiny: inference (batch 128, f16 and bf16 autocast, f32 with TF32) and a training step (batch 64, bf16)"
timeout -k 5 200 python3 bench/gpu_bench.py --model 2>&1 | tee "$out/gpu-bench-model.log"
echo "== CPU kernels built for this CPU"
c++ -O3 -march=native -pthread bench/fma_peak.cpp -o /tmp/fma_peak && /tmp/fma_peak --threads "$(nproc)"
echo
for threads in "$(nproc)" 1; do
  OMP_NUM_THREADS=$threads timeout -k 5 150 python3 bench/cross_cpu.py --json "$out/cpu-t$threads.json"
done
echo "== swin_tiny as above, also under torch.compile (last: inductor's compiles take minutes)"
timeout -k 5 300 python3 bench/gpu_bench.py --model --compiled --model-dtypes f16,bf16 2>&1 |
  tee "$out/gpu-bench-model-compiled.log"
