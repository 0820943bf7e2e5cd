#!/usr/bin/env bash
# The GPU checks in one call, under five minutes on one H100/H200-class GPU: the CUDA tests of the suite (the exact
# bf16 path's among them: tests/test_bf16_exact.py), then bench_gpu.py (every precision against the CPU's answer,
# bf16 exact by re-rank, and topk_rows over a 131,072 x 4,096 table against a bare torch.matmul of the same FLOPs,
# bf16 and fp32). Run from anywhere, on the machine with the GPU:
#     bash benchmarks/gpu_check.sh
# It needs python with numpy and torch (CUDA build); pytest only for the tests, which are skipped without it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OPENBLAS_THREAD_TIMEOUT="${OPENBLAS_THREAD_TIMEOUT:-4}"
python - <<'PY'
import torch
if not torch.cuda.is_available():
    raise SystemExit("gpu_check: torch sees no CUDA GPU here")
print("gpu_check:", torch.cuda.get_device_name(0), "torch", torch.__version__)
PY
if python -c "import pytest" 2>/dev/null; then
    workers=$(python -c "import xdist" 2>/dev/null && echo "-n 0" || true)
    timeout 120 python -m pytest -q -p no:cacheprovider $workers tests/test_compute.py tests/test_bf16_exact.py \
        -k "cuda or torch or bf16"
else
    echo "gpu_check: pytest is not installed: the CUDA tests are skipped (bench_gpu.py checks correctness too)"
fi
timeout 170 python benchmarks/bench_gpu.py --rows 131072 --dim 4096 --k 10
