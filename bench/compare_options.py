#!/usr/bin/env python3
"""compare_options.py - smx's softmax options beside PyTorch's composed equivalent (eager and torch.compile), in one
process, on the same CUDA tensors.

    python3 bench/compare_options.py --out docs/benchmarks/options-vs-torch-h200.json

Cases (issue 53), on (rows, cols) inputs, softmax over the last dim; each beside plain softmax on the same shape,
dtype pair and op (smx's "x plain"):
  option            smx                                   torch (eager, and torch.compile of the same function)
  plain             smx.softmax(x, out=)                  x.softmax(-1, dtype=)
  scale             smx.softmax(x, scale=1.25, out=)      (x * 1.25).softmax(-1, dtype=)
  scale_per_row     smx.softmax(x, scale=s, out=)         (x * s[:, None]).softmax(-1, dtype=)   s: f32, one per row
  causal            smx.softmax(v, causal=k, out=)        v.masked_fill(excluded, -inf).softmax(-1, dtype=)
                    v: x viewed as (batch, queries, cols), the view and offset k as smx-bench --options chooses
                    them; excluded = ones(queries, cols).triu(k + 1), made once, not timed
  additive_mask     smx.softmax(x, mask=m, out=)          (x + m).softmax(-1, dtype=)            m: x's shape and dtype
  bool_mask         smx.softmax(x, mask=keep, out=)       x.masked_fill(~keep, -inf).softmax(-1, dtype=)   keep: [1, cols]
                    (~keep made once, not timed)
  masked_rows_zero  smx.softmax(x, masked_rows="zero")    torch._safe_softmax(x, -1, dtype=) where torch has it, else
                                                          x.softmax(-1, dtype=).nan_to_num(0.0); log-softmax:
                                                          x.log_softmax(-1, dtype=).nan_to_num(-inf, inf, -inf)
  batch_invariant   smx.softmax(x, batch_invariant=True)  x.softmax(-1, dtype=) (torch has no such mode)
log_softmax (--ops) the same with log_softmax. dtype= is given where y's dtype is wider than x's; where it is
narrower, torch's result is cast with .to() (noted in the record).

Each case is checked first: smx into a NaN-poisoned output against torch's float64 computation of the same thing
on the same inputs (masked_rows_zero on a copy of the input whose row 0 is all -inf), on sampled rows for big
tensors; torch's own eager result is measured against the same reference and reported (torch_err_ratio) without
deciding anything. Timing as compare_torch.py: CUDA events around each call, the GPU held with torch.cuda._sleep
while a batch is enqueued, inputs (and full masks) rotated through at least 4x the L2, smx writing into
preallocated outputs and torch's results kept alive over as many buffers, medians. Bytes as smx-bench --options:
x read + y written + the mask's and the per-row scale's own bytes (causal: unread elements counted as read).

--device cpu runs every case's checks on CPU tensors (no timing, no torch.compile): the script's own paths, for a
machine without a GPU. --dry-run lists the cases and exits.

smx is imported from the installed package or from this checkout's python/ folder; libsmx is found the binding's
way (SMX_LIBRARY names the file).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
from compare_torch import (DTYPES, NAMES, RTOL, UNDERFLOW_SLACK, Timer, calls_for, copy_bandwidth,  # noqa: E402
                           import_smx, merged_records, run_meta, seeded_generator, summary)

SCALE = 1.25  # temperature 0.8, as smx-bench --options
ROW_SCALE_RANGE = (0.5, 2.0)
MINUS_INF_PERIOD = 16  # additive mask: one element in 16 is -inf
EXCLUDED_ONE_IN = 8    # bool mask: about one column in 8 excluded
SAMPLED_ROWS = 66      # bigger tensors are checked on the first, the last and 64 random rows
FULL_CHECK_MAX_ELEMENTS = 1 << 26

OPTIONS = ["plain", "scale", "scale_per_row", "causal", "additive_mask", "bool_mask", "masked_rows_zero",
           "batch_invariant"]
# A few of smx-bench's lastdim and decode shapes: torch.compile of every case takes most of a run's time.
LASTDIM_SHAPES = [(65536, 2048), (16384, 4096), (8192, 32000), (4096, 128256)]
DECODE_SHAPES = [(1, 128256), (64, 128256), (32, 256000)]
CPU_SHAPES = [(96, 96), (64, 1000), (2, 3000)]
PAIRS = ["bf16:bf16", "bf16:f32", "f32:f32"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file for the records")
    parser.add_argument("--append", action="store_true", help="merge into an existing --out file (same case replaced)")
    parser.add_argument("--options", default="all", help=f"all, or some of {','.join(OPTIONS[1:])} (plain always runs)")
    parser.add_argument("--group", default="all", choices=["lastdim", "decode", "all"])
    parser.add_argument("--shapes", help="RxC shapes, comma separated (default: the group's shapes)")
    parser.add_argument("--dtypes", default=",".join(PAIRS), help="dtype pairs X:Y, comma separated")
    parser.add_argument("--ops", default="softmax", help="softmax, log_softmax or both, comma separated")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--compile-limit-s", type=float, default=60.0,
                        help="a case whose compile takes longer reports torch_compile_us null")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: checks only, on CPU tensors (no timing)")
    parser.add_argument("--dry-run", action="store_true", help="list the cases and exit")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--commit", help="commit measured (default: $SMX_COMMIT, else git rev-parse HEAD)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    chosen = OPTIONS[1:] if args.options == "all" else [o for o in args.options.split(",") if o]
    for option in chosen:
        if option not in OPTIONS:
            parser.error(f"unknown option {option!r} (expected all or some of {','.join(OPTIONS[1:])})")
    args.options = ["plain"] + [o for o in OPTIONS[1:] if o in chosen]
    args.ops = [op for op in args.ops.split(",") if op]
    for op in args.ops:
        if op not in ("softmax", "log_softmax"):
            parser.error(f"unknown op {op!r}")
    pairs = []
    for pair in args.dtypes.split(","):
        x, _, y = pair.partition(":")
        if x not in DTYPES or y not in DTYPES:
            parser.error(f"bad dtype pair {pair!r} (expected X:Y with X, Y in {', '.join(DTYPES)})")
        pairs.append((DTYPES[x], DTYPES[y]))
    args.pairs = pairs
    if args.shapes:
        try:
            args.shapes = [tuple(int(d) for d in token.split("x")) for token in args.shapes.split(",") if token]
        except ValueError:
            parser.error(f"--shapes takes RxC shapes like 8192x32000, not {args.shapes!r}")
        if any(len(shape) != 2 or min(shape) < 1 for shape in args.shapes):
            parser.error("--shapes takes RxC shapes of positive sizes")
    return args


def label(shape):
    return "x".join(str(d) for d in shape)


def select_shapes(args):
    """[(group, shape)]: --shapes (group "custom" unless in a grid), else the device's and group's shapes."""
    if args.device == "cpu":
        grid = [("lastdim", s) for s in CPU_SHAPES]
    else:
        grid = ([("lastdim", s) for s in LASTDIM_SHAPES if args.group in ("lastdim", "all")] +
                [("decode", s) for s in DECODE_SHAPES if args.group in ("decode", "all")])
    if not args.shapes:
        return grid
    known = {shape: group for group, shape in [("lastdim", s) for s in LASTDIM_SHAPES] +
             [("decode", s) for s in DECODE_SHAPES]}
    return [(known.get(shape, "custom"), shape) for shape in args.shapes]


# ---------------------------------------------------------------------------------------------------
# The cases: smx-bench --options' choices, and the two sides' calls
# ---------------------------------------------------------------------------------------------------

def causal_view(group, shape):
    """((batch, queries, cols), offset) as smx-bench --options: decode rows one query at the end of its keys (all
    kept); square blocks where cols divides rows, offset 0; else one block aligned to the bottom right."""
    rows, cols = shape
    if group == "decode":
        return (rows, 1, cols), cols - 1
    if rows % cols == 0:
        return (rows // cols, cols, cols), 0
    return (1, rows, cols), max(0, cols - rows)


def kept_fraction(queries, cols, offset):
    return sum(min(max(i + offset + 1, 0), cols) for i in range(queries)) / (queries * cols)


def option_detail(option, group, shape, x_dtype):
    rows, cols = shape
    if option == "causal":
        view, offset = causal_view(group, shape)
        return f"offset {offset} on view {list(view)}, {100 * kept_fraction(view[1], cols, offset):.1f}% of elements kept"
    return {"plain": "no options", "scale": f"scale {SCALE} for every row",
            "scale_per_row": f"f32 scale per row in [{ROW_SCALE_RANGE[0]}, {ROW_SCALE_RANGE[1]})",
            "additive_mask": f"{NAMES[x_dtype]} additive mask of x's shape, 1 in {MINUS_INF_PERIOD} elements -inf",
            "bool_mask": f"bool keep-mask [1, {cols}] broadcast over rows, ~1 in {EXCLUDED_ONE_IN} excluded",
            "masked_rows_zero": "masked_rows='zero'; the checked call's row 0 all -inf",
            "batch_invariant": "batch_invariant=True"}[option]


def case_bytes(option, shape, x_dtype, y_dtype):
    rows, cols = shape
    nbytes = rows * cols * (x_dtype.itemsize + y_dtype.itemsize)
    extra = {"scale_per_row": 4 * rows, "additive_mask": rows * cols * x_dtype.itemsize, "bool_mask": cols}
    return nbytes + extra.get(option, 0)


def with_dtype(base, x_dtype, y_dtype):
    """base(z) -> base(z, -1) in y_dtype as torch spells it, and a note where that is not one call."""
    if y_dtype == x_dtype:
        return (lambda z: base(z, -1)), None
    if y_dtype.itemsize > x_dtype.itemsize:
        return (lambda z: base(z, -1, dtype=y_dtype)), None
    return (lambda z: base(z, -1).to(y_dtype)), f"torch result cast with .to({NAMES[y_dtype]})"


def torch_function(op, option, x_dtype, y_dtype):
    """(f(x, operand) -> y, note): torch's composed equivalent; operand is the case's tensor (per-row scale, mask,
    excluded elements) or None."""
    log = op == "log_softmax"
    normalize, note = with_dtype(torch.log_softmax if log else torch.softmax, x_dtype, y_dtype)
    if option in ("plain", "batch_invariant"):
        return (lambda x, operand: normalize(x)), note
    if option == "scale":
        return (lambda x, operand: normalize(x * SCALE)), note
    if option == "scale_per_row":
        return (lambda x, operand: normalize(x * operand[:, None])), note
    if option == "additive_mask":
        return (lambda x, operand: normalize(x + operand)), note
    if option in ("causal", "bool_mask"):
        return (lambda x, operand: normalize(x.masked_fill(operand, -math.inf))), note
    # masked_rows_zero
    if not log and hasattr(torch, "_safe_softmax"):
        dtype = y_dtype if y_dtype.itemsize > x_dtype.itemsize else None
        cast = (lambda y: y) if y_dtype.itemsize >= x_dtype.itemsize else (lambda y: y.to(y_dtype))
        return (lambda x, operand: cast(torch._safe_softmax(x, -1, dtype=dtype))), note
    fill = -math.inf if log else 0.0
    return (lambda x, operand: normalize(x).nan_to_num(fill, math.inf, -math.inf)), note


class Operands:
    """The tensors of one (shape, x dtype): inputs rotated past the L2, and what each option reads."""

    def __init__(self, group, shape, x_dtype, count, options, device, generator):
        rows, cols = shape
        self.count = count

        def normal(size):
            return (3.0 * torch.randn(size, device=device, generator=generator)).to(x_dtype)

        self.inputs = [normal(shape) for _ in range(count)]
        self.row_scale = self.masks = self.excluded_columns = self.excluded_causal = None
        if "scale_per_row" in options:
            low, high = ROW_SCALE_RANGE
            self.row_scale = low + (high - low) * torch.rand(rows, device=device, generator=generator)
        if "additive_mask" in options:
            self.masks = []
            for _ in range(count):
                mask = normal(shape).reshape(-1)
                mask[::MINUS_INF_PERIOD] = -math.inf
                self.masks.append(mask.reshape(shape))
        if "bool_mask" in options:
            draws = torch.randint(0, EXCLUDED_ONE_IN, (1, cols), device=device, generator=generator)
            self.keep = draws != 0
            self.excluded_columns = ~self.keep
        if "causal" in options:
            self.view, self.offset = causal_view(group, shape)
            queries = self.view[1]
            self.excluded_causal = torch.ones(queries, cols, dtype=torch.bool, device=device).triu(self.offset + 1)

    def smx_keywords(self, option, i):
        """smx's keyword arguments for call i."""
        return {"plain": {}, "scale": {"scale": SCALE}, "scale_per_row": {"scale": self.row_scale},
                "causal": {"causal": getattr(self, "offset", None)},
                "additive_mask": {"mask": None if self.masks is None else self.masks[i % self.count]},
                "bool_mask": {"mask": getattr(self, "keep", None)}, "masked_rows_zero": {"masked_rows": "zero"},
                "batch_invariant": {"batch_invariant": True}}[option]

    def torch_operand(self, option, i):
        return {"scale_per_row": self.row_scale, "causal": self.excluded_causal,
                "additive_mask": None if self.masks is None else self.masks[i % self.count],
                "bool_mask": self.excluded_columns}.get(option)

    def shaped(self, option, tensor):
        """x or y as the case's call sees it (causal: the (batch, queries, cols) view)."""
        return tensor.view(self.view) if option == "causal" else tensor


# ---------------------------------------------------------------------------------------------------
# The check: against torch's float64 computation of the same thing
# ---------------------------------------------------------------------------------------------------

def sampled_rows(rows, numel, generator, device):
    if numel <= FULL_CHECK_MAX_ELEMENTS or rows <= SAMPLED_ROWS:
        return torch.arange(rows, device=device)
    picks = torch.randperm(rows - 2, device=device, generator=generator)[:SAMPLED_ROWS - 2] + 1
    return torch.sort(torch.cat([torch.tensor([0, rows - 1], device=device), picks])).values


def reference_rows(op, option, operands, x, rows):
    """float64 y on `rows` of x (2-d) with the option applied as its definition says."""
    cols = x.shape[-1]
    z = x[rows].double()
    if option == "scale":
        z = z * SCALE
    elif option == "scale_per_row":
        z = z * operands.row_scale[rows].double()[:, None]
    elif option == "causal":
        z = z.masked_fill(operands.excluded_causal[rows % operands.view[1]], -math.inf)
    elif option == "additive_mask":
        z = z + operands.masks[0].reshape(-1, cols)[rows].double()
    elif option == "bool_mask":
        z = z.masked_fill(operands.excluded_columns, -math.inf)
    y = (torch.log_softmax if op == "log_softmax" else torch.softmax)(z, -1)
    if option == "masked_rows_zero":
        empty = (z == -math.inf).all(-1)
        y[empty] = -math.inf if op == "log_softmax" else 0.0
    return y


def max_error_ratio(got, expected, y_dtype, log):
    """Max |got - expected| / allowed with compare_torch's tolerances; inf where a NaN or an infinity disagrees."""
    got = got.double()
    infinite = torch.isinf(expected)
    if not torch.equal(torch.isnan(got), torch.isnan(expected)) or not torch.equal(got[infinite], expected[infinite]):
        return math.inf
    finite = torch.isfinite(expected)
    if not finite.any():
        return 0.0
    if not torch.isfinite(got[finite]).all():
        return math.inf
    rtol = RTOL[y_dtype]
    if log:
        allowed = rtol * (expected.abs() + 1.0)
    else:
        allowed = rtol * expected.abs() + UNDERFLOW_SLACK.get(y_dtype, torch.finfo(y_dtype).tiny)
    return ((got - expected).abs()[finite] / allowed[finite]).max().item()


# ---------------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------------

def new_record(group, shape, op, option, x_dtype, y_dtype, copy_bps):
    nbytes = case_bytes(option, shape, x_dtype, y_dtype)
    return {"op": op, "option": option, "option_detail": option_detail(option, group, shape, x_dtype),
            "group": group, "label": label(shape), "x_dtype": NAMES[x_dtype], "y_dtype": NAMES[y_dtype],
            "shape": list(shape), "bytes": nbytes, "copy_tbps": None if copy_bps is None else copy_bps / 1e12,
            "smx_us": None, "smx_plain_us": None, "ratio_to_plain": None, "torch_us": None, "torch_compile_us": None,
            "torch_note": None, "compile_note": None, "check": "FAIL", "max_err_ratio": None, "torch_err_ratio": None,
            "error": None}


def check_case(smx, op, option, operands, y_dtype, outputs, generator):
    """smx on input 0 (masked_rows_zero: a copy whose row 0 is all -inf) into a NaN-poisoned output, against the
    float64 reference; returns (smx's ratio, torch eager's ratio on the same input)."""
    x = operands.inputs[0]
    if option == "masked_rows_zero":
        x = x.clone()
        x[0] = -math.inf
    log = op == "log_softmax"
    function = smx.log_softmax if log else smx.softmax
    outputs[0].fill_(math.nan)
    function(operands.shaped(option, x), -1, out=operands.shaped(option, outputs[0]), **operands.smx_keywords(option, 0))
    torch_call, _ = torch_function(op, option, x.dtype, y_dtype)
    torch_y = torch_call(operands.shaped(option, x), operands.torch_operand(option, 0)).reshape(x.shape)
    rows = sampled_rows(x.shape[0], x.numel(), generator, x.device)
    expected = reference_rows(op, option, operands, x, rows)
    return (max_error_ratio(outputs[0][rows], expected, y_dtype, log),
            max_error_ratio(torch_y[rows], expected, y_dtype, log))


def measure(smx, timer, op, option, operands, y_dtype, outputs, args, generator, record):
    ratio, torch_ratio = check_case(smx, op, option, operands, y_dtype, outputs, generator)
    record.update(max_err_ratio=None if math.isinf(ratio) else ratio, check="ok" if ratio <= 1.0 else "FAIL",
                  torch_err_ratio=None if math.isinf(torch_ratio) else torch_ratio)
    if ratio > 1.0 or timer is None:
        return
    count = operands.count
    function = smx.log_softmax if op == "log_softmax" else smx.softmax

    def smx_call(i):
        function(operands.shaped(option, operands.inputs[i % count]), -1,
                 out=operands.shaped(option, outputs[i % count]), **operands.smx_keywords(option, i))

    calls, warmup = calls_for(record["bytes"] / (record["copy_tbps"] * 1e12) * 1e6, args.quick)
    record.update(calls=calls, buffers=count)
    record["smx_us"] = summary(timer.time_each(smx_call, calls, warmup))["median"]

    eager, record["torch_note"] = torch_function(op, option, operands.inputs[0].dtype, y_dtype)
    kept = [None] * count  # torch's results kept alive, so that its outputs rotate over as many buffers as smx's

    def timed(function):
        def call(i):
            kept[i % count] = function(operands.shaped(option, operands.inputs[i % count]),
                                       operands.torch_operand(option, i))
        return summary(timer.time_each(call, calls, warmup))["median"]

    record["torch_us"] = timed(eager)
    if not args.no_compile:
        torch._dynamo.reset()  # a fresh cache per case: no recompile limit, no silent fallback to eager
        compiled = torch.compile(eager, dynamic=False)
        try:
            started = time.perf_counter()
            compiled(operands.shaped(option, operands.inputs[0]), operands.torch_operand(option, 0))
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - started
            if compile_s > args.compile_limit_s:
                record["compile_note"] = f"compile took {compile_s:.0f} s > {args.compile_limit_s:.0f} s: skipped"
            else:
                record["torch_compile_us"] = timed(compiled)
        except Exception as error:  # noqa: BLE001 - any compile failure is reported, not fatal
            record["compile_note"] = f"torch.compile failed: {type(error).__name__}: {str(error)[:200]}"
    kept.clear()


def run_shape(smx, timer, group, shape, x_dtype, pairs, args, copy_bps, device, generator, report):
    """Every case of one (shape, x dtype): operands made once, then per y dtype and op plain and each option."""
    if device == "cpu":
        count = 1
    else:
        count = max(1, math.ceil(4 * torch.cuda.get_device_properties(0).L2_cache_size /
                                 (shape[0] * shape[1] * x_dtype.itemsize)))
    operands = Operands(group, shape, x_dtype, count, args.options, device, generator)
    for y_dtype in pairs:
        outputs = [torch.empty(shape, device=device, dtype=y_dtype) for _ in range(count)]
        for op in args.ops:
            plain_us = None
            for option in args.options:
                record = new_record(group, shape, op, option, x_dtype, y_dtype, copy_bps)
                try:
                    measure(smx, timer, op, option, operands, y_dtype, outputs, args, generator, record)
                except Exception as error:  # noqa: BLE001 - one broken case must not end the run
                    record["check"] = "FAIL"
                    record["error"] = f"{type(error).__name__}: {str(error)[:300]}"
                if option == "plain":
                    plain_us = record["smx_us"]
                record["smx_plain_us"] = plain_us
                report(record)
        del outputs
    del operands
    if device == "cuda":
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------

def ratio(numerator, denominator):
    return numerator / denominator if numerator is not None and denominator else None


def finish_record(record, meta):
    copy_bps = None if record["copy_tbps"] is None else record["copy_tbps"] * 1e12
    for key in ("smx", "torch", "torch_compile"):
        us = record[f"{key}_us"]
        record[f"{key}_pct_of_copy"] = None if us is None or copy_bps is None else 100.0 * record["bytes"] / (us * 1e-6) / copy_bps
    record["ratio_to_plain"] = None if record["option"] == "plain" else ratio(record["smx_us"], record["smx_plain_us"])
    record["speedup"] = ratio(record["torch_us"], record["smx_us"])
    record["speedup_compile"] = ratio(record["torch_compile_us"], record["smx_us"])
    record.update(meta)


def fmt(value, spec):
    width = spec.split(".")[0]
    return format("-", ">" + width) if value is None else format(value, spec)


HEADER = (f"{'op':<12} {'option':<17} {'x->y':<10} {'shape':<12} {'smx us':>9} {'x plain':>8} {'torch us':>9} "
          f"{'compile us':>10} {'smx%':>6} {'speedup':>8} {'vs comp':>8}  check (smx, torch err ratio)")


def print_row(record):
    print(f"{record['op']:<12} {record['option']:<17} {record['x_dtype'] + '->' + record['y_dtype']:<10} "
          f"{record['label']:<12} {fmt(record['smx_us'], '9.1f')} {fmt(record['ratio_to_plain'], '7.3f')}x "
          f"{fmt(record['torch_us'], '9.1f')} {fmt(record['torch_compile_us'], '10.1f')} "
          f"{fmt(record['smx_pct_of_copy'], '5.1f')}% {fmt(record['speedup'], '7.2f')}x "
          f"{fmt(record['speedup_compile'], '7.2f')}x  {record['check']} {fmt(record['max_err_ratio'], '.3g')} "
          f"{fmt(record['torch_err_ratio'], '.3g')}{'  ' + record['error'] if record.get('error') else ''}", flush=True)


def print_summary(records):
    failed = [r for r in records if r["check"] != "ok"]
    print(f"\n{len(records)} cases, {len(failed)} failed the check")
    options = [r for r in records if r["option"] != "plain"]
    for name, key in (("torch eager", "speedup"), ("torch.compile", "speedup_compile")):
        values = [r[key] for r in options if r[key] is not None]
        if values:
            print(f"speedup over {name}'s composed equivalent, options cases: median {statistics.median(values):.2f}x "
                  f"over {len(values)} cases, min {min(values):.2f}x")
    for option in dict.fromkeys(r["option"] for r in options):
        members = [r for r in options if r["option"] == option]
        to_plain = [r["ratio_to_plain"] for r in members if r["ratio_to_plain"] is not None]
        speedups = [r["speedup"] for r in members if r["speedup"] is not None]
        if to_plain:
            print(f"  {option}: time / plain median {statistics.median(to_plain):.3f} (max {max(to_plain):.3f}); "
                  f"speedup over torch median {statistics.median(speedups) if speedups else float('nan'):.2f}x")


def list_cases(args):
    print(f"{'op':<12} {'option':<17} {'x->y':<10} {'shape':<12} {'bytes':>12}  option detail")
    count = 0
    for group, shape in select_shapes(args):
        for x_dtype in dict.fromkeys(x for x, _ in args.pairs):
            for y_dtype in [y for x, y in args.pairs if x == x_dtype]:
                for op in args.ops:
                    for option in args.options:
                        _, note = torch_function(op, option, x_dtype, y_dtype)
                        print(f"{op:<12} {option:<17} {NAMES[x_dtype] + '->' + NAMES[y_dtype]:<10} {label(shape):<12} "
                              f"{case_bytes(option, shape, x_dtype, y_dtype):>12}  "
                              f"{option_detail(option, group, shape, x_dtype)}{'; ' + note if note else ''}")
                        count += 1
    print(f"{count} cases")


def case_key(record):
    return (record["op"], record["option"], record["label"], record["x_dtype"], record["y_dtype"])


def main():
    args = parse_args()
    if args.dry_run:
        list_cases(args)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_options.py needs a CUDA device visible to PyTorch (--device cpu checks on the CPU)")
    smx = import_smx()
    generator, seed = seeded_generator(args, args.device)
    timer = copy_bps = None
    device_name = "cpu"
    if args.device == "cuda":
        timer = Timer()
        copy_bps = copy_bandwidth(timer, args.quick)
        device_name = torch.cuda.get_device_properties(0).name
    meta = run_meta(args, device_name)
    print(f"compare_options: smx {smx.version()} ({smx.library_path()}), torch {torch.__version__}, "
          f"commit {meta['commit']}, seed {seed}")
    if copy_bps is not None:
        print(f"device: {device_name}; copy bandwidth {copy_bps / 1e12:.3f} TB/s (bytes read + written)")
    else:
        print("device: cpu: checks only, nothing timed")
    print(HEADER)
    records = []

    def report(record):
        finish_record(record, meta)
        print_row(record)
        records.append(record)

    for group, shape in select_shapes(args):
        for x_dtype in dict.fromkeys(x for x, _ in args.pairs):
            pairs = [y for x, y in args.pairs if x == x_dtype]
            print(f"[{len(records) + 1}] {label(shape)} {NAMES[x_dtype]}", file=sys.stderr, flush=True)
            run_shape(smx, timer, group, shape, x_dtype, pairs, args, copy_bps, args.device, generator, report)
    print_summary(records)
    if args.out:
        merged = merged_records(args.out, records, case_key) if args.append else records
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as file:
            json.dump({"tool": "compare_options", "torch_version": torch.__version__, "seed": seed,
                       "copy_tbps": None if copy_bps is None else copy_bps / 1e12, **meta, "records": merged},
                      file, indent=1)
        print(f"wrote {args.out} ({len(merged)} records)")
    return 1 if any(r["check"] != "ok" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
