#!/usr/bin/env python3
"""compare_torch.py - smx against PyTorch eager and torch.compile, in one process, on the same CUDA tensors.

    python3 bench/compare_torch.py --out docs/benchmarks/h200.json --plot docs/benchmarks/h200.png

For every case of smx-bench's CUDA grid (issue 5: last dim and other layouts; issue 6: decode) it times
smx (output preallocated with out=), torch.softmax / torch.log_softmax, and torch.compile of the same
function, with CUDA events around each call, after a warm-up, over inputs rotated through at least 4x the
L2, and reports the median. The device-to-device copy bandwidth is measured in the same run the same way.
Every smx result is first checked against torch's float64 softmax of the same input.

With --pass backward it does the same for the gradients on the same grid: smx.softmax_backward /
smx.log_softmax_backward against torch._softmax_backward_data / torch._log_softmax_backward_data on the same
dy and y (y the forward's output of fresh x; a pair X:Y is the forward's, so dy and y are Y and dx is X), bytes
counted as dy and y read plus dx written, each smx result checked against the formulas in float64 first.

smx is imported from the installed package or from this checkout's python/ folder; libsmx is found the
binding's way (SMX_LIBRARY names the file). matplotlib is only needed for --plot.
"""

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
NAMES = {dtype: name for name, dtype in DTYPES.items()}
# Relative tolerance per output dtype, as smx-bench and the tests use.
RTOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-5, torch.float64: 1e-12}
# Absolute slack for softmax outputs that underflow: the smallest normal (finfo.tiny), but for float16 its
# smallest subnormal, as the C++ tests (float16 keeps gradual underflow down to 2^-24).
UNDERFLOW_SLACK = {torch.float16: 2.0 ** -24}
FULL_CHECK_MAX_ELEMENTS = 1 << 26  # bigger tensors are checked on sampled rows
SAMPLED_RANDOM_ROWS = 64
# Targets of issue 5: the share of copy bandwidth each group should reach.
TARGET_PCT = {"lastdim": 90.0, "layouts": 80.0}

# The grid mirrors smx-bench's CUDA grid (bench/bench_grid.cpp): keep the two in step.
LASTDIM_SHAPES = [(1048576, 32), (1048576, 128), (262144, 512), (131072, 1024), (65536, 2048), (16384, 4096),
                  (8192, 8192), (4096, 16384), (8192, 32000), (8192, 50257), (4096, 128256)]
DECODE_SHAPES = [(1, 32000), (1, 128256), (8, 128256), (64, 128256), (1, 256000), (32, 256000), (1, 1048576),
                 (4, 4194304)]
MAIN_PAIRS = ["f32:f32", "f16:f16", "bf16:bf16", "bf16:f32", "f16:f32", "f32:bf16"]
DECODE_PAIRS = ["f32:f32", "bf16:bf16", "bf16:f32"]


def shape_text(shape):
    return "x".join(str(d) for d in shape)


def layout(group, shape, dim=-1, transposed=False):
    """A case layout; transposed: the transpose of a row-major (shape[1], shape[0]) tensor."""
    label = shape_text(shape)
    if transposed:
        label += ":transposed"
    elif group == "layouts":
        label += f":dim={dim}"
    return {"group": group, "shape": tuple(shape), "dim": dim, "transposed": transposed, "label": label}


def custom_layout(token):
    """A --shapes token naming no grid case, in smx-bench's forms: "AxB..." (softmax over the last dim),
    "AxB...:dim=N" (over dim N of the contiguous tensor) or "RxC:transposed"; None if it is none of them."""
    text, _, suffix = token.partition(":")
    parts = text.split("x")
    if not parts or len(parts) > 8 or not all(p.isdigit() and len(p) <= 12 for p in parts):
        return None
    shape = tuple(int(p) for p in parts)
    if ":" not in token:
        return layout("custom", shape)
    if suffix == "transposed":
        return layout("custom", shape, -1, transposed=True) if len(shape) == 2 else None
    number = suffix[len("dim="):] if suffix.startswith("dim=") else ""
    digits = number[1:] if number.startswith("-") else number
    if not digits.isdigit() or len(digits) > 2 or not -len(shape) <= int(number) < len(shape):
        return None
    item = layout("custom", shape, int(number))
    item["label"] = f"{shape_text(shape)}:dim={int(number)}"
    return item


def default_grid():
    grid = [layout("lastdim", s) for s in LASTDIM_SHAPES]
    grid += [layout("layouts", (32, 1024, 1024), 1), layout("layouts", (8192, 4096), 0),
             layout("layouts", (64, 128, 4096), 1), layout("layouts", (16, 8, 4096, 64), 2),
             layout("layouts", (8192, 4096), -1, transposed=True)]
    grid += [layout("decode", s) for s in DECODE_SHAPES]
    return grid


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file for the records")
    parser.add_argument("--plot", help="PNG file: TB/s per case, one panel per group (needs matplotlib)")
    parser.add_argument("--plot-from", metavar="JSON",
                        help="measure nothing: draw --plot from the records of an earlier run's --out file")
    parser.add_argument("--append", action="store_true",
                        help="merge into an existing --out file (same case replaced), e.g. to assemble a run in parts")
    parser.add_argument("--group", default="all", choices=["lastdim", "layouts", "decode", "all"])
    parser.add_argument("--ops", default="softmax,log_softmax")
    parser.add_argument("--pass", dest="pass_", default="forward", choices=["forward", "backward"],
                        help="forward: y from x; backward: dx from dy and y")
    parser.add_argument("--dtypes", help="dtype pairs X:Y,... (default: each group's pairs)")
    parser.add_argument("--shapes", help="case labels, bare shapes (every case of that shape), or new layouts: "
                        "AxB... (last dim), AxB...:dim=N, RxC:transposed; comma separated (default: all)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile mode (default, max-autotune-no-cudagraphs, ...)")
    parser.add_argument("--compile-limit-s", type=float, default=60.0,
                        help="a case whose compile takes longer reports torch_compile_us null")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--commit", help="commit measured (default: $SMX_COMMIT, else git rev-parse HEAD)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    ops = args.ops.split(",")
    for op in ops:
        if op not in ("softmax", "log_softmax"):
            parser.error(f"unknown op {op!r}")
    args.ops = ops
    if args.dtypes:
        for pair in args.dtypes.split(","):
            x, _, y = pair.partition(":")
            if x not in DTYPES or y not in DTYPES:
                parser.error(f"bad dtype pair {pair!r} (expected X:Y with X, Y in {', '.join(DTYPES)})")
    return args


def select_cases(args):
    groups = ["lastdim", "layouts", "decode"] if args.group == "all" else [args.group]
    tokens = [t for t in args.shapes.split(",") if t] if args.shapes else None
    chosen = []
    used = set()
    for item in default_grid():
        if item["group"] not in groups:
            continue
        matched = [t for t in tokens if t in (item["label"], shape_text(item["shape"]))] if tokens else [None]
        if matched:
            chosen.append(item)
            used.update(matched)
    # Tokens naming no grid case of the selected groups are new layouts, as in smx-bench.
    for token in tokens or []:
        if token in used:
            continue
        item = custom_layout(token)
        if item is None:
            sys.exit(f"compare_torch: shape {token!r} is neither a grid label nor a shape like 4096x4096, "
                     "64x512x512:dim=1 or 4096x8192:transposed")
        chosen.append(item)
    cases = []
    for item in chosen:
        pairs = args.dtypes.split(",") if args.dtypes else (DECODE_PAIRS if item["group"] == "decode" else MAIN_PAIRS)
        cases.append((item, [tuple(DTYPES[n] for n in p.split(":")) for p in pairs]))
    return cases


def commit_text(args):
    if args.commit:
        return args.commit
    if os.environ.get("SMX_COMMIT"):
        return os.environ["SMX_COMMIT"]
    try:
        return subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def seeded_generator(args, device="cuda"):
    """(generator, seed): a generator on `device` seeded with --seed, else from the clock (printed by the caller,
    so a run can be repeated)."""
    generator = torch.Generator(device=device)
    seed = args.seed if args.seed is not None else time.time_ns() % (1 << 63)
    generator.manual_seed(seed)
    return generator, seed


def run_meta(args, device_name):
    """The fields every record of a run carries: the device, the commit measured and the date."""
    return {"device": device_name, "commit": commit_text(args),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def import_smx():
    try:
        import smx  # noqa: F401  (an installed binding)
    except ImportError:
        sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
        import smx  # noqa: F401
    return sys.modules["smx"]


# ---------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------

class Timer:
    """Times calls with CUDA events. Before each timed batch, a spin kernel (torch.cuda._sleep) holds the
    GPU long enough for the host to enqueue the whole batch, so host overhead never shows as device time."""

    def __init__(self):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # the first launch loads the kernel's module: not part of the calibration
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        torch.cuda.synchronize()
        self.cycles_per_us = cycles / (start.elapsed_time(stop) * 1000.0)

    def time_each(self, call, calls, warmup):
        """call(i) for warm-up then `calls` timed calls; returns microseconds per timed call. If the hold
        ended before the batch was enqueued (the first event had already completed when the last call was
        queued), host time could show as device time: the batch is timed again with a longer hold."""
        host_start = time.perf_counter()
        for i in range(warmup):
            call(i)
        host_us = (time.perf_counter() - host_start) * 1e6 / max(warmup, 1)
        torch.cuda.synchronize()
        margin = 1.5
        for _ in range(4):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1)]
            # Hold the GPU for `margin` x the host time of enqueueing the batch (plus 200 us).
            torch.cuda._sleep(int(self.cycles_per_us * (margin * host_us * calls + 200.0)))
            events[0].record()
            for i in range(calls):
                call(warmup + i)
                events[i + 1].record()
            held = not events[0].query()
            torch.cuda.synchronize()
            if held:
                break
            margin *= 4
        else:
            raise RuntimeError("the GPU could not be held while the timed calls were enqueued")
        return [1000.0 * events[i].elapsed_time(events[i + 1]) for i in range(calls)]


def summary(micros):
    ordered = sorted(micros)
    p90 = ordered[max(1, math.ceil(0.9 * len(ordered))) - 1]
    return {"median": statistics.median(ordered), "min": ordered[0], "p90": p90}


def calls_for(expected_us, quick):
    if quick:
        return 10, 3
    return int(min(50, max(10, 50000.0 / max(expected_us, 1.0)))), 5


def copy_bandwidth(timer, quick):
    """Device-to-device copy between two 1 GiB buffers, bytes read + written per second."""
    size = 1 << 30
    buffers = [torch.empty(size, dtype=torch.uint8, device="cuda").fill_(0x5A),
               torch.empty(size, dtype=torch.uint8, device="cuda").fill_(0xA5)]
    micros = timer.time_each(lambda i: buffers[(i + 1) % 2].copy_(buffers[i % 2]), 10 if quick else 20, 3)
    del buffers
    return 2.0 * size / (summary(micros)["median"] * 1e-6)


# ---------------------------------------------------------------------------------------------------
# The functions compared
# ---------------------------------------------------------------------------------------------------

def torch_function(op, x_dtype, y_dtype):
    """torch's own way to compute op with output y_dtype, and a note when it is not one direct call."""
    base = torch.softmax if op == "softmax" else torch.log_softmax
    if y_dtype == x_dtype:
        return (lambda x, dim: base(x, dim)), None
    if y_dtype.itemsize > x_dtype.itemsize:
        # dtype= casts the input up before the op: the upcast pairs' native form
        return (lambda x, dim: base(x, dim, dtype=y_dtype)), None
    note = f"torch has no direct {NAMES[x_dtype]}->{NAMES[y_dtype]} form: timed torch.{op}(x).to({NAMES[y_dtype]})"
    return (lambda x, dim: base(x, dim).to(y_dtype)), note


def make_inputs(item, x_dtype, count, generator):
    shape = item["shape"]
    tensors = []
    for _ in range(count):
        if item["transposed"]:
            base = torch.randn(shape[1], shape[0], device="cuda", dtype=torch.float32, generator=generator)
            tensors.append((3.0 * base).to(x_dtype).t())
        else:
            tensors.append((3.0 * torch.randn(shape, device="cuda", dtype=torch.float32, generator=generator)).to(x_dtype))
    return tensors


def check_against_float64(y, x, dim, log_mode, generator):
    """Max ratio of |y - ref| to the allowed error (ref: torch float64 on the same x); inf on NaN."""
    n = x.shape[dim]
    xr = x.movedim(dim, -1).reshape(-1, n)
    yr = y.movedim(dim, -1).reshape(-1, n)
    rows = xr.shape[0]
    sampled = x.numel() > FULL_CHECK_MAX_ELEMENTS and rows > SAMPLED_RANDOM_ROWS + 2
    if sampled:
        # The first, the last and SAMPLED_RANDOM_ROWS distinct others, as smx-bench checks.
        picks = torch.randperm(rows - 2, device="cuda", generator=generator)[:SAMPLED_RANDOM_ROWS] + 1
        index = torch.sort(torch.cat([torch.tensor([0, rows - 1], device="cuda"), picks])).values
        xr, yr = xr[index], yr[index]
    ref = (torch.log_softmax if log_mode else torch.softmax)(xr.double(), -1)
    got = yr.double()
    rtol = RTOL[y.dtype]
    if log_mode:
        allowed = rtol * (ref.abs() + 1.0)
    else:
        allowed = rtol * ref.abs() + UNDERFLOW_SLACK.get(y.dtype, torch.finfo(y.dtype).tiny)
    ratio = ((got - ref).abs() / allowed).max().item()
    if math.isnan(ratio) or not torch.isfinite(got).all().item():
        ratio = math.inf
    return ratio, int(xr.shape[0]), sampled


# ---------------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------------

def new_record(item, op, x_dtype, y_dtype, nbytes, copy_bps):
    """A case's record before it runs: failed until its check passes."""
    return {"op": op, "group": item["group"], "label": item["label"], "x_dtype": NAMES[x_dtype],
            "y_dtype": NAMES[y_dtype], "shape": list(item["shape"]), "strides": None, "dim": item["dim"],
            "bytes": nbytes, "copy_tbps": copy_bps / 1e12, "plan": None, "smx_us": None, "torch_us": None,
            "torch_compile_us": None, "graph_us": None, "torch_graph_us": None, "torch_note": None,
            "compile_note": None, "check": "FAIL", "max_err_ratio": None, "error": None}


def guarded(record, measure):
    """Runs measure(); any failure is recorded in the record's "error" and "check" fields."""
    try:
        measure()
    except Exception as error:  # noqa: BLE001 - one broken case must not end the run
        record["check"] = "FAIL"
        record["error"] = f"{type(error).__name__}: {str(error)[:300]}"
    return record


def run_case(smx, timer, item, op, x_dtype, y_dtype, inputs, copy_bps, args, generator):
    """Checks then times one case."""
    record = new_record(item, op, x_dtype, y_dtype, inputs[0].numel() * (x_dtype.itemsize + y_dtype.itemsize), copy_bps)
    record["strides"] = list(inputs[0].stride())
    return guarded(record, lambda: measure(smx, timer, item, op, y_dtype, inputs, copy_bps, args, generator, record))


def measure(smx, timer, item, op, y_dtype, inputs, copy_bps, args, generator, record):
    dim = item["dim"]
    x_dtype = inputs[0].dtype
    nbytes = record["bytes"]
    log_mode = op == "log_softmax"
    smx_op = smx.log_softmax if log_mode else smx.softmax
    count = len(inputs)
    outputs = [torch.empty_like(x, dtype=y_dtype) for x in inputs]  # x's layout, as smx-bench uses
    try:
        record["plan"] = smx.plan(inputs[0], dim, dtype=y_dtype, log=log_mode)
    except TypeError:  # a binding whose plan() has no log= parameter
        record["plan"] = smx.plan(inputs[0], dim, dtype=y_dtype)

    # Correct first: smx into a NaN-poisoned output, against float64.
    outputs[0].fill_(float("nan"))
    smx_op(inputs[0], dim, out=outputs[0])
    torch.cuda.synchronize()
    ratio, rows_checked, sampled = check_against_float64(outputs[0], inputs[0], dim, log_mode, generator)
    record.update(max_err_ratio=None if math.isinf(ratio) else ratio, rows_checked=rows_checked,
                  check_sampled=sampled, check="ok" if ratio <= 1.0 else "FAIL")
    if ratio > 1.0:
        return

    calls, warmup = calls_for(nbytes / copy_bps * 1e6, args.quick)
    record.update(calls=calls, buffers=count)
    smx_times = summary(timer.time_each(lambda i: smx_op(inputs[i % count], dim, out=outputs[i % count]),
                                        calls, warmup))
    record.update(smx_us=smx_times["median"], smx_min_us=smx_times["min"], smx_p90_us=smx_times["p90"])

    eager, record["torch_note"] = torch_function(op, x_dtype, y_dtype)
    # torch allocates each result: keep the last `count` alive, so that its outputs rotate over as many
    # buffers as smx's (a result dropped at once hands the same, L2-resident block to the next call).
    kept = [None] * count

    def eager_kept(i):
        kept[i % count] = eager(inputs[i % count], dim)

    record["torch_us"] = summary(timer.time_each(eager_kept, calls, warmup))["median"]

    if not args.no_compile:
        torch._dynamo.reset()  # a fresh cache per case: no recompile limit, no silent fallback to eager
        compiled = torch.compile(eager, mode=None if args.compile_mode == "default" else args.compile_mode,
                                 dynamic=False)
        try:
            started = time.perf_counter()
            compiled(inputs[0], dim)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - started
            if compile_s > args.compile_limit_s:
                record["compile_note"] = f"compile took {compile_s:.0f} s > {args.compile_limit_s:.0f} s: skipped"
            else:
                def compiled_kept(i):
                    kept[i % count] = compiled(inputs[i % count], dim)

                record["torch_compile_us"] = summary(timer.time_each(compiled_kept, calls, warmup))["median"]
        except Exception as error:  # noqa: BLE001 - any compile failure is reported, not fatal
            record["compile_note"] = f"torch.compile failed: {type(error).__name__}: {str(error)[:200]}"

    kept.clear()
    if item["group"] == "decode":
        record["graph_us"] = graph_time(timer, lambda i: smx_op(inputs[i], dim, out=outputs[i]), count, args, record)
        record["torch_graph_us"] = graph_time(timer, lambda i: eager(inputs[i], dim), count, args, record)


def graph_time(timer, call, count, args, record):
    """Per-call microseconds of a CUDA graph holding one call per input buffer, replayed."""
    captured = min(count, 4096)
    try:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(2):  # warm-up on the capture stream, as torch's graph docs ask
                call(i % captured)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            # Results kept alive through the capture: each call gets its own output in the graph's pool,
            # as smx writes its own `out` per input (dropped, the pool would hand every call one block).
            results = [call(i) for i in range(captured)]
        replays = 5 if args.quick else 10
        micros = timer.time_each(lambda i: graph.replay(), replays, 2)
        del results  # the graph's outputs: alive until it has been timed
        return summary(micros)["median"] / captured
    except Exception as error:  # noqa: BLE001
        record["error"] = f"graph capture failed: {type(error).__name__}: {str(error)[:200]}"
        return None


# ---------------------------------------------------------------------------------------------------
# One backward case
# ---------------------------------------------------------------------------------------------------

def torch_backward_function(op, x_dtype, y_dtype):
    """torch's backward of op (grad_output and output in y_dtype, the gradient in x_dtype), and a note when it
    is not torch's own one call (torch refuses some dtype pairs: the gradient is then cast)."""
    base = torch._log_softmax_backward_data if op == "log_softmax" else torch._softmax_backward_data
    probe_dy = torch.zeros(2, 2, device="cuda", dtype=y_dtype)
    try:
        base(probe_dy, probe_dy, 1, x_dtype)
        return (lambda dy, y, dim: base(dy, y, dim, x_dtype)), None
    except RuntimeError:
        note = (f"torch has no {NAMES[y_dtype]} -> {NAMES[x_dtype]} backward: timed "
                f"torch._{op}_backward_data(dy, y, dim, {NAMES[y_dtype]}).to({NAMES[x_dtype]})")
        return (lambda dy, y, dim: base(dy, y, dim, y_dtype).to(x_dtype)), note


def check_backward_against_float64(dx, dy, y, dim, log_mode, generator):
    """Max ratio of |dx - ref| to the allowed error, the formulas in float64 on the same dy and y (rtol: dx's,
    or float32's where larger and nothing is f64; error scale as smx-bench's check); inf on NaN."""
    n = y.shape[dim]
    rows = [t.movedim(dim, -1).reshape(-1, n) for t in (dx, dy, y)]
    count = rows[0].shape[0]
    sampled = y.numel() > FULL_CHECK_MAX_ELEMENTS and count > SAMPLED_RANDOM_ROWS + 2
    if sampled:
        picks = torch.randperm(count - 2, device="cuda", generator=generator)[:SAMPLED_RANDOM_ROWS] + 1
        index = torch.sort(torch.cat([torch.tensor([0, count - 1], device="cuda"), picks])).values
        rows = [r[index] for r in rows]
    got, g, out = (r.double() for r in rows)
    terms = g if log_mode else g * out
    total = terms.sum(-1, keepdim=True)
    magnitude = terms.abs().sum(-1, keepdim=True)
    if log_mode:
        weight = out.exp()
        ref, scale = g - weight * total, g.abs() + weight * magnitude
    else:
        ref, scale = out * (g - total), out.abs() * (g.abs() + magnitude)
    f64 = torch.float64 in (dx.dtype, y.dtype)
    rtol = max(RTOL[dx.dtype], RTOL[torch.float64 if f64 else torch.float32])
    allowed = rtol * scale + UNDERFLOW_SLACK.get(dx.dtype, torch.finfo(dx.dtype).tiny)
    ratio = ((got - ref).abs() / allowed).max().item()
    if math.isnan(ratio) or not torch.isfinite(got).all().item():
        ratio = math.inf
    return ratio, int(got.shape[0]), sampled


def make_backward_inputs(item, op, x_dtype, y_dtype, count, generator):
    """`count` (dy, y) pairs laid out as the forward's inputs: y the forward's output of fresh x, dy N(0, 3)."""
    pairs = []
    forward = torch.log_softmax if op == "log_softmax" else torch.softmax
    for x in make_inputs(item, x_dtype, count, generator):
        y = torch.empty_like(x, dtype=y_dtype)  # x's layout, as smx-bench lays out every operand
        y.copy_(forward(x.double(), item["dim"]))
        dy = torch.empty_like(y)
        dy.copy_(3.0 * torch.randn(dy.shape, device="cuda", dtype=torch.float32, generator=generator))
        pairs.append((dy, y))
    return pairs


def run_backward_case(smx, timer, item, op, x_dtype, y_dtype, copy_bps, args, generator, count):
    """Checks then times one backward case (inputs made here: y depends on the op)."""
    nbytes = math.prod(item["shape"]) * (2 * y_dtype.itemsize + x_dtype.itemsize)
    record = new_record(item, f"{op}_backward", x_dtype, y_dtype, nbytes, copy_bps)
    record["compile_note"] = "not timed for the backward"
    return guarded(record, lambda: measure_backward(smx, timer, item, op, x_dtype, y_dtype, args, generator, count,
                                                    record))


def measure_backward(smx, timer, item, op, x_dtype, y_dtype, args, generator, count, record):
    dim = item["dim"]
    log_mode = op == "log_softmax"
    smx_op = smx.log_softmax_backward if log_mode else smx.softmax_backward
    inputs = make_backward_inputs(item, op, x_dtype, y_dtype, count, generator)
    record["strides"] = list(inputs[0][1].stride())
    outputs = [torch.empty_like(y, dtype=x_dtype) for _, y in inputs]

    outputs[0].fill_(float("nan"))
    smx_op(inputs[0][0], inputs[0][1], dim, dtype=x_dtype, out=outputs[0])
    torch.cuda.synchronize()
    ratio, rows_checked, sampled = check_backward_against_float64(outputs[0], inputs[0][0], inputs[0][1], dim,
                                                                 log_mode, generator)
    record.update(max_err_ratio=None if math.isinf(ratio) else ratio, rows_checked=rows_checked,
                  check_sampled=sampled, check="ok" if ratio <= 1.0 else "FAIL")
    if ratio > 1.0:
        return

    calls, warmup = calls_for(record["bytes"] / record["copy_tbps"] / 1e12 * 1e6, args.quick)
    record.update(calls=calls, buffers=count)

    def smx_call(i):
        dy, y = inputs[i % count]
        smx_op(dy, y, dim, dtype=x_dtype, out=outputs[i % count])

    smx_times = summary(timer.time_each(smx_call, calls, warmup))
    record.update(smx_us=smx_times["median"], smx_min_us=smx_times["min"], smx_p90_us=smx_times["p90"])

    eager, record["torch_note"] = torch_backward_function(op, x_dtype, y_dtype)
    kept = [None] * count  # torch's results kept alive, so its outputs rotate over as many buffers as smx's

    def eager_kept(i):
        dy, y = inputs[i % count]
        kept[i % count] = eager(dy, y, dim)

    record["torch_us"] = summary(timer.time_each(eager_kept, calls, warmup))["median"]
    kept.clear()
    if item["group"] == "decode":
        def smx_graph_call(i):
            smx_op(inputs[i][0], inputs[i][1], dim, dtype=x_dtype, out=outputs[i])

        record["graph_us"] = graph_time(timer, smx_graph_call, count, args, record)
        record["torch_graph_us"] = graph_time(timer, lambda i: eager(inputs[i][0], inputs[i][1], dim), count, args,
                                              record)


# ---------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------

def pct(us, nbytes, copy_bps):
    return None if us is None else 100.0 * nbytes / (us * 1e-6) / copy_bps


def finish_record(record, copy_bps, meta):
    nbytes = record["bytes"]
    record["smx_pct_of_copy"] = pct(record["smx_us"], nbytes, copy_bps)
    record["tbps"] = None if record["smx_us"] is None else nbytes / (record["smx_us"] * 1e-6) / 1e12
    record["torch_pct_of_copy"] = pct(record["torch_us"], nbytes, copy_bps)
    record["torch_compile_pct_of_copy"] = pct(record["torch_compile_us"], nbytes, copy_bps)
    record["speedup"] = (record["torch_us"] / record["smx_us"]) if record["smx_us"] and record["torch_us"] else None
    record.update(meta)


def fmt(value, spec):
    """value formatted by spec ("10.1f"), or a dash padded to the same width when there is none."""
    width = spec.split(".")[0]
    return format("-", ">" + width) if value is None else format(value, spec)


def print_row(record):
    print(f"{record['op']:<20} {record['x_dtype'] + '->' + record['y_dtype']:<10} {record['label']:<24} "
          f"{fmt(record['smx_us'], '10.1f')} {fmt(record['torch_us'], '10.1f')} {fmt(record['torch_compile_us'], '10.1f')} "
          f"{fmt(record['smx_pct_of_copy'], '6.1f')}% {fmt(record['torch_pct_of_copy'], '6.1f')}% "
          f"{fmt(record['speedup'], '6.2f')}x  {record['check']} {fmt(record['max_err_ratio'], '.3g')}"
          f"{'  ' + record['error'] if record.get('error') else ''}", flush=True)


def print_summary(records):
    timed = [r for r in records if r["speedup"] is not None]
    failed = [r for r in records if r["check"] != "ok"]
    print(f"\n{len(records)} cases, {len(failed)} failed the check")
    if timed:
        slowest = min(timed, key=lambda r: r["speedup"])
        print(f"speedup over torch eager: median {statistics.median(r['speedup'] for r in timed):.2f}x, "
              f"min {slowest['speedup']:.2f}x ({slowest['op']} {slowest['x_dtype']}->{slowest['y_dtype']} "
              f"{slowest['label']})")
    for group, target in TARGET_PCT.items():
        members = [r for r in records if r["group"] == group and r["smx_pct_of_copy"] is not None]
        under = [r for r in members if r["smx_pct_of_copy"] < target]
        print(f"{group}: {len(under)} of {len(members)} cases under {target:.0f}% of copy bandwidth")
        for r in under:
            print(f"  {r['op']} {r['x_dtype']}->{r['y_dtype']} {r['label']}: {r['smx_pct_of_copy']:.1f}%")


def plot(records, copy_tbps, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path}")
        return
    groups = [g for g in ("lastdim", "layouts", "decode", "custom") if any(r["group"] == g for r in records)]
    fig, axes = plt.subplots(len(groups), 1, figsize=(22, 5.5 * len(groups)), squeeze=False)
    for axis, group in zip(axes[:, 0], groups):
        members = [r for r in records if r["group"] == group]
        positions = range(len(members))
        for key, label, marker in (("smx_us", "smx", "o"), ("torch_us", "torch eager", "s"),
                                   ("torch_compile_us", "torch.compile", "^")):
            rates = [r["bytes"] / (r[key] * 1e-6) / 1e12 if r.get(key) else float("nan") for r in members]
            axis.plot(positions, rates, marker, label=label, markersize=4)
        axis.axhline(copy_tbps, color="gray", linestyle="--", label=f"copy {copy_tbps:.2f} TB/s")
        axis.set_xticks(list(positions))
        axis.set_xticklabels([f"{r['label']} {r['x_dtype']}->{r['y_dtype']} {'log' if r['op'].startswith('log_softmax') else ''}"
                              for r in members], rotation=90, fontsize=6)
        axis.set_ylabel("TB/s (bytes read + written)")
        axis.set_title(f"{group}: smx vs PyTorch")
        axis.legend(fontsize=8)
        axis.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def merged_records(path, records, key):
    """The records of an earlier JSON file at `path` (if any) whose key(record) no new record has, then `records`:
    --append's merge, so that a run can be assembled from parts."""
    if not os.path.exists(path):
        return records
    with open(path) as file:
        earlier = json.load(file)["records"]
    fresh = {key(r) for r in records}
    return [r for r in earlier if key(r) not in fresh] + records


def case_key(record):
    return (record["op"], record["label"], record["x_dtype"], record["y_dtype"])


def main():
    args = parse_args()
    if args.plot_from:
        if not args.plot:
            sys.exit("--plot-from needs --plot")
        with open(args.plot_from) as file:
            run = json.load(file)
        plot(run["records"], run["copy_tbps"], args.plot)
        return
    if not torch.cuda.is_available():
        sys.exit("compare_torch.py needs a CUDA device visible to PyTorch")
    smx = import_smx()
    generator, seed = seeded_generator(args)
    properties = torch.cuda.get_device_properties(0)
    timer = Timer()
    copy_bps = copy_bandwidth(timer, args.quick)
    meta = run_meta(args, properties.name)
    print(f"compare_torch: smx {smx.version()} ({smx.library_path()}), torch {torch.__version__}, "
          f"commit {meta['commit']}, seed {seed}")
    print(f"device: {properties.name}, L2 {properties.L2_cache_size / 2**20:.0f} MiB; "
          f"copy bandwidth {copy_bps / 1e12:.3f} TB/s (device-to-device copy of 1 GiB, bytes read + written)")
    print(f"{'op':<20} {'x->y':<10} {'shape':<24} {'smx us':>10} {'torch us':>10} {'compile us':>10} "
          f"{'smx%':>7} {'torch%':>7} {'speedup':>7}  check")

    records = []

    def run_and_report(name, x_dtype, y_dtype, item, run):
        print(f"[{len(records) + 1}] {name} {NAMES[x_dtype]}->{NAMES[y_dtype]} {item['label']}", file=sys.stderr,
              flush=True)
        record = run()
        finish_record(record, copy_bps, meta)
        print_row(record)
        records.append(record)

    for item, pairs in select_cases(args):
        if args.pass_ == "backward":
            for x_dtype, y_dtype in pairs:
                y_bytes = math.prod(item["shape"]) * y_dtype.itemsize
                count = max(1, math.ceil(4 * properties.L2_cache_size / (2 * y_bytes)))
                for op in args.ops:
                    run_and_report(f"{op}_backward", x_dtype, y_dtype, item, lambda: run_backward_case(
                        smx, timer, item, op, x_dtype, y_dtype, copy_bps, args, generator, count))
                    torch.cuda.empty_cache()
            continue
        for x_dtype in dict.fromkeys(x for x, _ in pairs):  # inputs made once per (layout, x dtype)
            x_bytes = math.prod(item["shape"]) * x_dtype.itemsize
            count = max(1, math.ceil(4 * properties.L2_cache_size / x_bytes))
            inputs = make_inputs(item, x_dtype, count, generator)
            for _, y_dtype in [p for p in pairs if p[0] == x_dtype]:
                for op in args.ops:
                    run_and_report(op, x_dtype, y_dtype, item, lambda: run_case(
                        smx, timer, item, op, x_dtype, y_dtype, inputs, copy_bps, args, generator))
            del inputs
            torch.cuda.empty_cache()

    print_summary(records)
    if args.out:
        merged = merged_records(args.out, records, case_key) if args.append else records
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as file:
            json.dump({"tool": "compare_torch", "torch_version": torch.__version__, "seed": seed,
                       "copy_tbps": copy_bps / 1e12,
                       "copy_method": "device-to-device copy of 1 GiB (torch copy_), bytes read + written",
                       **meta, "records": merged}, file, indent=1)
        print(f"wrote {args.out} ({len(merged)} records)")
        records = merged
    if args.plot:
        plot(records, copy_bps / 1e12, args.plot)
    return 1 if any(r["check"] != "ok" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
