#!/usr/bin/env python3
"""compare_logprobs.py - smx's log-probability operators beside PyTorch (eager and torch.compile) and Liger's
fused cross-entropy, in one process, on the same CUDA tensors.

    python3 bench/compare_logprobs.py --out docs/benchmarks/logprobs-h200.json

Cases (issue 54): logsumexp and log_softmax(...).gather on the language-model shapes and decode rows; the
cross-entropy forward (loss) and forward + backward (loss and dlogits) on (8192, 32000) and (16384, 128256)
bf16 and (4096, 151936) f32. Each is checked first (smx against torch in float64, on sampled rows), then timed
with CUDA events after a warm-up, over inputs rotated through at least 4x the L2, and reported as the median.
The device-to-device copy bandwidth is measured in the same run the same way. Bytes: x read once (logsumexp,
gather, forward), logits read once + dlogits written once (forward + backward).

What is timed, per operator:
  logsumexp        smx.logsumexp(x, out=)            torch.logsumexp(x, -1)
  gather           smx.log_softmax_gather(x, i)      torch.log_softmax(x, -1, dtype=float32).gather(-1, i)
  ce forward       smx.cross_entropy(x, t)           F.cross_entropy(x.float(), t)
  ce fwd+bwd       torch.ops.smx.cross_entropy_with_grad (loss and dlogits in one pass); smx.cross_entropy with
                   autograd (+ backward's dlogits * grad_output); F.cross_entropy(x.float(), t).backward();
                   Liger's LigerCrossEntropyLoss forward + backward, where liger_kernel imports (skipped
                   otherwise).
torch.compile times the same torch functions compiled (the forward + backward as one compiled loss, then its
backward). Liger's backward compares grad_output with 1 on the host (a synchronization), so Liger is timed per
call without holding the GPU: its times include whatever host time is not hidden.

smx is imported from the installed package or from this checkout's python/ folder; libsmx is found the
binding's way (SMX_LIBRARY names the file).
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
import compare_torch  # noqa: E402
from compare_torch import Timer, calls_for, copy_bandwidth, run_meta, seeded_generator, summary  # noqa: E402  (the same timing)

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
NAMES = {dtype: name for name, dtype in DTYPES.items()}
RTOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-5, torch.float64: 1e-12}
IGNORE_INDEX = -100
IGNORE_EVERY = 16  # every 16th row's target is ignored, as smx-bench's cases
SAMPLED_ROWS = 16
# Issue 54's targets: the share of copy bandwidth smx should reach, per op.
TARGET_PCT = {"logsumexp": 90.0, "log_softmax_gather": 90.0, "cross_entropy_forward": 85.0, "cross_entropy": 85.0}

CASES = [
    ("logsumexp", "lastdim", (8192, 151936), "bf16"), ("logsumexp", "lastdim", (16384, 128256), "bf16"),
    ("logsumexp", "lastdim", (8192, 32000), "bf16"), ("logsumexp", "lastdim", (4096, 151936), "f32"),
    ("logsumexp", "decode", (256, 151936), "bf16"), ("logsumexp", "decode", (64, 128256), "bf16"),
    ("logsumexp", "decode", (32, 256000), "f32"),
    ("log_softmax_gather", "lastdim", (8192, 151936), "bf16"), ("log_softmax_gather", "lastdim", (16384, 128256), "bf16"),
    ("log_softmax_gather", "lastdim", (8192, 32000), "bf16"), ("log_softmax_gather", "lastdim", (4096, 151936), "f32"),
    ("log_softmax_gather", "decode", (256, 151936), "bf16"), ("log_softmax_gather", "decode", (64, 128256), "bf16"),
    ("log_softmax_gather", "decode", (32, 256000), "f32"),
    ("cross_entropy_forward", "lastdim", (8192, 32000), "bf16"),
    ("cross_entropy_forward", "lastdim", (16384, 128256), "bf16"),
    ("cross_entropy_forward", "lastdim", (4096, 151936), "f32"),
    ("cross_entropy", "lastdim", (8192, 32000), "bf16"), ("cross_entropy", "lastdim", (16384, 128256), "bf16"),
    ("cross_entropy", "lastdim", (4096, 151936), "f32"),
]
OPS = list(dict.fromkeys(case[0] for case in CASES))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file for the records")
    parser.add_argument("--ops", default=",".join(OPS), help=f"some of {','.join(OPS)}")
    parser.add_argument("--shapes", help="RxC labels, comma separated (default: every case)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--no-liger", action="store_true", help="skip Liger even where it imports")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--commit", help="commit measured (default: $SMX_COMMIT, else git rev-parse HEAD)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    args.ops = args.ops.split(",")
    for op in args.ops:
        if op not in OPS:
            parser.error(f"unknown op {op!r}")
    args.shapes = [s for s in args.shapes.split(",") if s] if args.shapes else None
    return args


def label(shape):
    return "x".join(str(d) for d in shape)


def import_smx():
    """smx as compare_torch finds it, with its torch operators registered (torch.ops.smx)."""
    smx = compare_torch.import_smx()
    import smx.torch  # noqa: F401
    return smx


def import_liger():
    """Liger's cross-entropy module class, or None with the reason it is not there."""
    try:
        from liger_kernel.transformers import LigerCrossEntropyLoss
        return LigerCrossEntropyLoss, None
    except Exception as error:  # noqa: BLE001 - absent, or present but broken: skipped either way
        return None, f"liger_kernel does not import: {type(error).__name__}: {str(error)[:120]}"


def time_plain(call, calls, warmup):
    """Per-call microseconds with events around each call and no hold: for callees that synchronize."""
    for i in range(warmup):
        call(i)
    torch.cuda.synchronize()
    micros = []
    for i in range(calls):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(warmup + i)
        stop.record()
        stop.synchronize()
        micros.append(1000.0 * start.elapsed_time(stop))
    return micros


# ---------------------------------------------------------------------------------------------------
# Checks against torch in float64, on sampled rows
# ---------------------------------------------------------------------------------------------------

def sampled(rows, generator):
    if rows <= SAMPLED_ROWS:
        return torch.arange(rows, device="cuda")
    picks = torch.randperm(rows - 2, device="cuda", generator=generator)[:SAMPLED_ROWS - 2] + 1
    return torch.sort(torch.cat([torch.tensor([0, rows - 1], device="cuda"), picks])).values


def ratio_of(got, expected, allowed):
    got, expected = got.double(), expected.double()
    if not torch.equal(torch.isnan(got), torch.isnan(expected)):
        return math.inf
    finite = torch.isfinite(expected)
    if not torch.equal(got[~finite & ~torch.isnan(expected)], expected[~finite & ~torch.isnan(expected)]):
        return math.inf
    if not finite.any():
        return 0.0
    return ((got - expected).abs()[finite] / allowed[finite]).max().item()


def check_case(op, x, index, results, generator):
    """Max ratio of |smx - torch float64| to the allowed error over sampled rows (the loss over all rows)."""
    rows = sampled(x.shape[0], generator)
    xr = x[rows].double()
    lse = torch.logsumexp(xr, -1)
    rtol = RTOL[torch.float32]
    if op == "logsumexp":
        return ratio_of(results["out"][rows], lse, rtol * (lse.abs() + 1.0))
    if op == "log_softmax_gather":
        expected = torch.log_softmax(xr, -1).gather(-1, index[rows])
        return ratio_of(results["out"][rows], expected, rtol * (expected.abs() + lse.abs().unsqueeze(-1) + 1.0))
    counted = (index != IGNORE_INDEX).sum().item()
    loss = F.cross_entropy(x.double(), index, ignore_index=IGNORE_INDEX)  # over the whole batch
    worst = ratio_of(results["loss"].reshape(1), loss.reshape(1), rtol * (loss.abs().reshape(1) + 1.0))
    if "dlogits" in results:
        target = index[rows]
        keep = (target != IGNORE_INDEX).unsqueeze(-1)
        p = torch.softmax(xr, -1)
        onehot = torch.zeros_like(p).scatter_(-1, target.clamp(min=0).unsqueeze(-1), 1.0)
        expected = torch.where(keep, (p - onehot) / counted, torch.zeros_like(p))
        grad_rtol = RTOL[results["dlogits"].dtype]
        allowed = grad_rtol * (expected.abs() + p * (xr.abs() + lse.abs().unsqueeze(-1) + 1.0) / counted) + 1e-30
        worst = max(worst, ratio_of(results["dlogits"][rows], expected, allowed))
    return worst


# ---------------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------------

def functions(smx, op, liger_class):
    """{name: (call(x, index) -> result, timing)} for the op; timing is "held" or "plain" (see time_plain)."""
    if op == "logsumexp":
        return {"smx": (lambda x, i, out: smx.logsumexp(x, -1, out=out), "held"),
                "torch": (lambda x, i, out: torch.logsumexp(x, -1), "held")}
    if op == "log_softmax_gather":
        return {"smx": (lambda x, i, out: smx.log_softmax_gather(x, i, -1), "held"),
                "torch": (lambda x, i, out: torch.log_softmax(x, -1, dtype=torch.float32).gather(-1, i), "held")}
    if op == "cross_entropy_forward":
        return {"smx": (lambda x, i, out: smx.cross_entropy(x, i, ignore_index=IGNORE_INDEX), "held"),
                "torch": (lambda x, i, out: F.cross_entropy(x.float(), i, ignore_index=IGNORE_INDEX), "held")}

    def torch_train(x, i, out):
        x.grad = None
        F.cross_entropy(x.float(), i, ignore_index=IGNORE_INDEX).backward()
        return x.grad

    def smx_autograd(x, i, out):
        x.grad = None
        smx.cross_entropy(x, i, ignore_index=IGNORE_INDEX).backward()
        return x.grad

    def smx_fused(x, i, out):
        with torch.no_grad():  # the op itself: loss, lse and dlogits from one pass, no autograd around it
            return torch.ops.smx.cross_entropy_with_grad(x.detach(), i, -1, IGNORE_INDEX, 0.0, "mean")

    table = {"smx": (smx_fused, "held"),
             "smx_autograd": (smx_autograd, "held"),
             "torch": (torch_train, "held")}
    if liger_class is not None:
        liger = liger_class(ignore_index=IGNORE_INDEX)

        def liger_train(x, i, out):
            x.grad = None
            liger(x, i).backward()
            return x.grad

        table["liger"] = (liger_train, "plain")
    return table


def compiled_function(op):
    """The torch function of the op for torch.compile (forward + backward: the compiled loss, then backward)."""
    if op == "logsumexp":
        return lambda x, i: torch.logsumexp(x, -1), False
    if op == "log_softmax_gather":
        return lambda x, i: torch.log_softmax(x, -1, dtype=torch.float32).gather(-1, i), False
    return lambda x, i: F.cross_entropy(x.float(), i, ignore_index=IGNORE_INDEX), op == "cross_entropy"


def run_case(smx, timer, op, group, shape, dtype, copy_bps, liger_class, liger_note, args, generator):
    rows, classes = shape
    x_bytes = rows * classes * dtype.itemsize
    nbytes = 2 * x_bytes if op == "cross_entropy" else x_bytes
    record = {"op": op, "group": group, "label": label(shape), "x_dtype": NAMES[dtype], "shape": list(shape),
              "bytes": nbytes, "copy_tbps": copy_bps / 1e12, "check": "FAIL", "max_err_ratio": None, "error": None,
              "notes": []}
    try:
        measure(smx, timer, op, shape, dtype, copy_bps, liger_class, args, generator, record)
    except Exception as error:  # noqa: BLE001 - one broken case must not end the run
        record["error"] = f"{type(error).__name__}: {str(error)[:300]}"
    if op == "cross_entropy" and liger_class is None and liger_note:
        record["notes"].append(liger_note)
    for key in [k for k in record if k.endswith("_us")]:
        record[key.replace("_us", "_pct_of_copy")] = (None if record[key] is None
                                                       else 100.0 * nbytes / (record[key] * 1e-6) / copy_bps)
    return record


def measure(smx, timer, op, shape, dtype, copy_bps, liger_class, args, generator, record):
    rows, classes = shape
    properties = torch.cuda.get_device_properties(0)
    count = max(1, math.ceil(4 * properties.L2_cache_size / (rows * classes * dtype.itemsize)))
    grad = op == "cross_entropy"
    inputs = [(3.0 * torch.randn(shape, device="cuda", generator=generator)).to(dtype).requires_grad_(grad)
              for _ in range(count)]
    if op == "log_softmax_gather":
        index = torch.randint(0, classes, (rows, 1), device="cuda", generator=generator)
    else:
        index = torch.randint(0, classes, (rows,), device="cuda", generator=generator)
        index[IGNORE_EVERY - 1::IGNORE_EVERY] = IGNORE_INDEX
    outputs = [torch.empty(rows, device="cuda", dtype=torch.float32) for _ in range(count)]
    table = functions(smx, op, None if args.no_liger else liger_class)

    # Correct first: smx on fresh inputs, against torch in float64.
    with torch.no_grad():
        if op == "cross_entropy":
            loss, _lse, dlogits = table["smx"][0](inputs[0], index, None)
            results = {"loss": loss, "dlogits": dlogits}
        elif op == "cross_entropy_forward":
            results = {"loss": table["smx"][0](inputs[0], index, None)}
        else:
            results = {"out": table["smx"][0](inputs[0], index, outputs[0])}
    torch.cuda.synchronize()
    ratio = check_case(op, inputs[0].detach(), index, results, generator)
    record.update(max_err_ratio=None if math.isinf(ratio) else ratio, check="ok" if ratio <= 1.0 else "FAIL")
    del results
    if ratio > 1.0:
        return

    calls, warmup = calls_for(record["bytes"] / copy_bps * 1e6, args.quick)
    record.update(calls=calls, buffers=count)
    kept = [None] * count  # results kept alive, so allocations rotate as the inputs do
    for name, (function, timing) in table.items():
        def call(i, function=function):
            kept[i % count] = function(inputs[i % count], index, outputs[i % count])
        try:
            with torch.set_grad_enabled(grad):
                micros = (timer.time_each(call, calls, warmup) if timing == "held" else time_plain(call, calls, warmup))
            record[f"{name}_us"] = summary(micros)["median"]
        except Exception as error:  # noqa: BLE001
            record[f"{name}_us"] = None
            record["notes"].append(f"{name} failed: {type(error).__name__}: {str(error)[:200]}")
        kept = [None] * count
        torch.cuda.empty_cache()

    if not args.no_compile:
        torch._dynamo.reset()
        function, backward = compiled_function(op)
        compiled = torch.compile(function, dynamic=False)

        def compiled_call(i):
            x = inputs[i % count]
            if backward:
                x.grad = None
                compiled(x, index).backward()
                kept[i % count] = x.grad
            else:
                kept[i % count] = compiled(x, index)
        try:
            with torch.set_grad_enabled(grad):
                compiled_call(0)
                torch.cuda.synchronize()
                record["torch_compile_us"] = summary(timer.time_each(compiled_call, calls, warmup))["median"]
        except Exception as error:  # noqa: BLE001
            record["torch_compile_us"] = None
            record["notes"].append(f"torch.compile failed: {type(error).__name__}: {str(error)[:200]}")
    del inputs, outputs, kept
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------

COLUMNS = ["smx", "smx_autograd", "torch", "torch_compile", "liger"]


def print_row(record):
    cells = []
    for name in COLUMNS:
        us = record.get(f"{name}_us")
        cells.append("-" if us is None else f"{us:.1f} ({record[f'{name}_pct_of_copy']:.0f}%)")
    print(f"{record['op']:<22} {record['x_dtype']:<5} {record['label']:<13} " +
          " ".join(f"{c:>18}" for c in cells) +
          f"  {record['check']}{'  ' + record['error'] if record.get('error') else ''}", flush=True)


def print_summary(records):
    failed = [r for r in records if r["check"] != "ok"]
    print(f"\n{len(records)} cases, {len(failed)} failed the check")
    for r in records:
        smx_us = r.get("smx_us")
        if smx_us is None:
            continue
        ratios = ", ".join(f"{name} {r[name + '_us'] / smx_us:.2f}x" for name in COLUMNS[2:] if r.get(name + "_us"))
        target = TARGET_PCT[r["op"]]
        verdict = "meets" if r["smx_pct_of_copy"] >= target else "UNDER"
        print(f"  {r['op']} {r['x_dtype']} {r['label']}: smx {r['smx_pct_of_copy']:.1f}% of copy ({verdict} "
              f"{target:.0f}%); others / smx: {ratios}")
        for note in r["notes"]:
            print(f"    note: {note}")


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("compare_logprobs.py needs a CUDA device visible to PyTorch")
    smx = import_smx()
    liger_class, liger_note = (None, "--no-liger") if args.no_liger else import_liger()
    generator, seed = seeded_generator(args)
    properties = torch.cuda.get_device_properties(0)
    timer = Timer()
    copy_bps = copy_bandwidth(timer, args.quick)
    meta = run_meta(args, properties.name)
    print(f"compare_logprobs: smx {smx.version()} ({smx.library_path()}), torch {torch.__version__}, "
          f"liger {'yes' if liger_class else 'no (' + str(liger_note) + ')'}, commit {meta['commit']}, seed {seed}")
    print(f"device: {properties.name}; copy bandwidth {copy_bps / 1e12:.3f} TB/s (bytes read + written)")
    print(f"{'op':<22} {'dtype':<5} {'shape':<13} " + " ".join(f"{name + ' us':>18}" for name in COLUMNS) + "  check")
    records = []
    for op, group, shape, dtype_name in CASES:
        if op not in args.ops or (args.shapes and label(shape) not in args.shapes):
            continue
        print(f"[{len(records) + 1}] {op} {dtype_name} {label(shape)}", file=sys.stderr, flush=True)
        record = run_case(smx, timer, op, group, shape, DTYPES[dtype_name], copy_bps, liger_class, liger_note, args,
                          generator)
        record.update(meta)
        print_row(record)
        records.append(record)
    print_summary(records)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as file:
            json.dump({"tool": "compare_logprobs", "torch_version": torch.__version__, "seed": seed,
                       "copy_tbps": copy_bps / 1e12, **meta, "records": records}, file, indent=1)
        print(f"wrote {args.out} ({len(records)} records)")
    return 1 if any(r["check"] != "ok" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
