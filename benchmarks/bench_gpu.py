"""topk_rows on a CUDA GPU vs torch.matmul of the same shape, and GPU results vs the CPU's.

    python3 benchmarks/bench_gpu.py [--rows 131072] [--dim 4096] [--k 10]
    python3 benchmarks/bench_gpu.py --cpu      # the very same torch code path, on the CPU

Without a GPU (and without --cpu) it says so and exits 0. Sections: (1) correctness of
every precision against the numpy CPU result on a smaller table with bad and duplicate
rows (fp32 and bf16, exact by re-rank, must equal it but for ties within 1e-6); (2) throughput of
topk_rows in bf16 and fp32 vs a blocked torch.matmul of the whole problem's FLOPs on the same device
(target >= 70%), end to end and in the steady state (bf16 works out half the matrix: its tiles are symmetric).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from embscope.compute import topk_rows
from embscope.compute.devices import torch_block_bytes
from embscope.compute.numpy_engine import NumpyEngine
from embscope.compute.torch_engine import TorchEngine


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def check_table(rows, dim):
    """Random rows plus the hard cases: a zero, a NaN and an Inf row, and exact duplicates."""
    table = np.random.default_rng(1).standard_normal((rows, dim), dtype=np.float32)
    table[3] = 0.0
    table[5, 0] = np.nan
    table[8, 1] = np.inf
    table[100:110] = table[10]  # ten copies of row 10: ties that must break by id
    return table


def section_correctness(device, precisions, rows, dim, k):
    print(f"\n(1) correctness on {rows} x {dim} (bad rows, duplicated rows) vs numpy on the CPU, k={k}")
    table = check_table(rows, dim)
    reference = topk_rows(table, k, device="cpu", _engine=NumpyEngine())
    failed = False
    for precision in precisions:
        got = topk_rows(table, k, device=device, precision=precision, _engine=TorchEngine())
        same = np.mean(got.ids == reference.ids)
        found = reference.ids[:, 0] >= 0  # rows with neighbours (an invalid query has none)
        sets = np.mean([len(set(a) & set(b)) / k for a, b in zip(got.ids[found], reference.ids[found])])
        both = ~np.isnan(reference.scores)
        diff = float(np.max(np.abs(got.scores[both] - reference.scores[both])))
        nan_ok = np.array_equal(np.isnan(got.scores), np.isnan(reference.scores))
        ties_ok = np.array_equal(got.ids[10], reference.ids[10])
        # an id that differs from numpy's must be a tie: the same fp32 score within 1e-6 (bf16 is exact by re-rank)
        differ = (got.ids != reference.ids) & both
        untied = int(np.sum(np.abs(got.scores[differ] - reference.scores[differ]) > 1e-6))
        print(f"    {precision:5s}: ids identical {100 * same:7.3f}%, sets {100 * sets:7.3f}%, "
              f"max |score diff| {diff:.2e}, NaN rows match: {nan_ok}, duplicate ties by id: {ties_ok}, "
              f"ids off by more than a tie: {untied}")
        if precision in ("fp32", "bf16") and (untied or diff > 1e-5 or not nan_ok or not ties_ok):
            failed = True
    return failed


def timed_topk(torch, table, k, device, precision):
    stamps = []

    def progress(done, total):
        # No synchronize here: topk_rows hands back a block once its results reached the
        # host, while the device already runs the next one; a sync would stall that overlap.
        stamps.append((time.perf_counter(), done))

    start = time.perf_counter()
    topk_rows(table, k, device=device, precision=precision, progress=progress, _engine=TorchEngine())
    synchronize(torch, device)
    total = time.perf_counter() - start
    # Steady state: from the first block handed back to the last, i.e. without setup and
    # transfer. Results come back one block behind the device, so this needs many blocks.
    steady = (stamps[-1][0] - stamps[0][0], stamps[-1][1] - stamps[0][1]) if len(stamps) >= 8 else None
    return total, steady


def blocked_matmul(torch, unit, block, device):
    out = None
    synchronize(torch, device)
    start = time.perf_counter()
    for first in range(0, unit.shape[0], block):
        out = unit[first:first + block] @ unit.T
    synchronize(torch, device)
    del out
    return time.perf_counter() - start


def section_throughput(torch, device, precisions, rows, dim, k):
    print(f"\n(2) throughput on {rows} x {dim}, k={k}, device {device}"
          + (" (a smoke test: torch's small CPU sorts make this path slow on a CPU)" if device == "cpu" else ""))
    if device == "cuda":
        generator = torch.Generator(device="cuda").manual_seed(0)
        table = torch.randn(rows, dim, device="cuda", generator=generator).cpu().numpy()
    else:
        table = np.random.default_rng(0).standard_normal((rows, dim), dtype=np.float32)
    flops = 2.0 * rows * rows * dim
    block = max(1, torch_block_bytes(device) // (4 * rows))
    unit32 = torch.nn.functional.normalize(torch.from_numpy(table).to(device), dim=1)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in topk_rows
    for precision in precisions:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        unit = unit32.to(dtype)
        blocked_matmul(torch, unit[:block * 2], block, device)  # warm up kernels
        t_mm = blocked_matmul(torch, unit, block, device)
        del unit
        total, steady = timed_topk(torch, table, k, device, precision)
        print(f"    {precision}: matmul {flops / t_mm / 1e12:8.2f} TFLOP/s ({t_mm:.2f} s, blocks of {block})")
        print(f"    {precision}: topk_rows end to end {flops / total / 1e12:8.2f} TFLOP/s ({total:.2f} s, "
              f"incl. moving and normalising the table) = {100 * t_mm / total:.0f}% of matmul")
        if steady is None:
            print(f"    {precision}: too few blocks for a steady-state figure")
        else:
            seconds, done_rows = steady
            rate = 2.0 * done_rows * rows * dim / seconds
            print(f"    {precision}: topk_rows steady state {rate / 1e12:8.2f} TFLOP/s "
                  f"= {100 * rate / (flops / t_mm):.0f}% of matmul (target >= 70%)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true",
                        help="run the torch (GPU) code path on the CPU, at a small default size")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    if importlib.util.find_spec("torch") is None:
        print("torch is not installed: no GPU path to measure (pip install torch)")
        return 0
    import torch
    if args.cpu:
        device, precisions = "cpu", ["fp32", "bf16"]
        rows, dim = args.rows or 8192, args.dim or 256
        check_rows, check_dim = 4000, 64
    elif torch.cuda.is_available():
        device, precisions = "cuda", ["bf16", "fp32"]
        rows, dim = args.rows or 131072, args.dim or 4096
        check_rows, check_dim = 20000, 256
        print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    else:
        print("no CUDA GPU visible to torch: nothing to measure here "
              "(run with --cpu to exercise the same code path on the CPU)")
        return 0
    checked = precisions + ["tf32", "fp16"]
    failed = section_correctness(device, checked, check_rows, check_dim, args.k)
    section_throughput(torch, device, precisions, rows, dim, args.k)
    if failed:
        print("\nFAILED: fp32 or bf16 results on the device differ from the CPU result by more than ties")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
