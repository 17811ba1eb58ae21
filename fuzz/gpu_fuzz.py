"""Random CUDA cases through the Python binding, checked against torch's float64 softmax: every plan family
(the long-rows rule, or SMX_CUDA_LONG_ROWS forcing cluster / grid / split / steps; the long-columns rule,
or SMX_CUDA_LONG_COLUMNS=online; `split` names the rule), every dtype pair,
permuted and padded layouts, in place, special values (masked -inf stretches holding a NaN, +inf, all -inf
rows, NaN), NaN-poisoned outputs inside guarded allocations (no element outside y may change), and
problems drawn again after others (with fresh layouts, so mostly new descriptors; those whose layout
repeats reuse their cached one). Checks as the tests: rtol per y dtype, f16 slack 2^-24. Needs a GPU,
torch and libsmx with CUDA (perf-notes run 164 has its first results):

    SMX_LIBRARY=build/src/libsmx.so PYTHONPATH=python python3 fuzz/gpu_fuzz.py SECONDS SEED
"""
import math
import os
import random
import sys
import time

import torch

import smx

SECONDS, SEED = float(sys.argv[1]), int(sys.argv[2])
rng = random.Random(SEED)
gen = torch.Generator(device="cuda").manual_seed(SEED)
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
PAIRS = [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("bf16", "f32"), ("f16", "f32"), ("f32", "bf16"),
         ("f32", "f16"), ("f64", "f64"), ("bf16", "f16")]
RTOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-5, torch.float64: 1e-12}
SLACK = {torch.float16: 2.0 ** -24, torch.bfloat16: 2.0 ** -126, torch.float32: 2.0 ** -126,
         torch.float64: 2.2250738585072014e-308}
FORCED = [None, None, "cluster", "grid", "split", "steps"]
FORCED_COLUMNS = [None, None, "online", "split"]
MAX_ELEMENTS = 1 << 25


def log_uniform(lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def random_problem():
    kind = rng.choice(["rows", "rows", "long", "spatial", "columns", "nd"])
    if kind == "rows":
        cols = log_uniform(1, 70000)
        shape, dim = [log_uniform(1, max(1, min(3000, MAX_ELEMENTS // cols)))], 1
        shape.append(cols)
    elif kind == "long":
        cols = log_uniform(100000, 4200000)
        shape, dim = [rng.randint(1, max(1, min(40, MAX_ELEMENTS // cols))), cols], 1
    elif kind == "columns":  # too long for any cluster: spatial-online or spatial-split
        axis = log_uniform(240000, 3000000)
        inner = log_uniform(1, max(1, min(48, MAX_ELEMENTS // axis)))
        shape, dim = [rng.randint(1, max(1, min(4, MAX_ELEMENTS // (axis * inner)))), axis, inner], 1
    elif kind == "spatial":
        axis = log_uniform(1, 9000)
        inner = log_uniform(1, 600)
        outer = log_uniform(1, max(1, min(64, MAX_ELEMENTS // (axis * inner))))
        shape, dim = [outer, axis, inner], 1
    else:
        nd = rng.randint(2, 5)
        shape = [log_uniform(1, 40) for _ in range(nd)]
        dim = rng.randrange(nd)
    return shape, dim


def strided(shape, dtype):
    """(view, base): a tensor of `shape` in a random layout (dims permuted in memory, some padded), and the
    contiguous allocation it lies in."""
    nd = len(shape)
    order = list(range(nd))
    if rng.random() < 0.5:
        rng.shuffle(order)
    pads = [rng.choice([0, 0, 0, 1, 3]) for _ in range(nd)]
    alloc = [shape[d] + pads[d] for d in order]
    base = torch.empty(alloc, dtype=dtype, device="cuda")
    view = base[tuple(slice(0, shape[d]) for d in order)]
    inverse = [order.index(d) for d in range(nd)]
    return view.permute(inverse), base


def fill(x, shape, dim):
    x.copy_((3.0 * torch.randn(shape, device="cuda", generator=gen, dtype=torch.float32)).to(x.dtype))
    if rng.random() < 0.35 and x.numel() > 0:
        moved = x.movedim(dim, -1)
        n = moved.shape[-1]
        lead = list(moved.shape[:-1])
        for _ in range(rng.randint(1, 4)):
            index = tuple(rng.randrange(s) for s in lead)
            line = moved[index]
            what = rng.choice(["mask", "mask_nan", "inf", "allneg", "nan"])
            if what in ("mask", "mask_nan"):
                start = rng.randrange(n)
                length = rng.randint(1, n - start)
                line[start:start + length] = -math.inf
                if what == "mask_nan":
                    line[start + rng.randrange(length)] = math.nan
            elif what == "inf":
                line[rng.randrange(n)] = math.inf
            elif what == "allneg":
                line[:] = -math.inf
            else:
                line[rng.randrange(n)] = math.nan


def check(y, x, dim, log_mode):
    ref = (torch.log_softmax if log_mode else torch.softmax)(x.double(), dim)
    got = y.double()
    nan_ref, nan_got = torch.isnan(ref), torch.isnan(got)
    if not torch.equal(nan_ref, nan_got):
        return f"NaN mismatch: {int((nan_ref != nan_got).sum())} elements"
    finite = ~nan_ref
    ref_f, got_f = ref[finite], got[finite]
    inf = torch.isinf(ref_f)
    if not torch.equal(ref_f[inf], got_f[inf]):
        return "infinity mismatch"
    ref_f, got_f = ref_f[~inf], got_f[~inf]
    if not torch.isfinite(got_f).all():
        return "non-finite where the reference is finite"
    rtol = RTOL[y.dtype]
    allowed = rtol * (ref_f.abs() + 1) if log_mode else rtol * ref_f.abs() + SLACK[y.dtype]
    if got_f.numel():
        ratio = ((got_f - ref_f).abs() / allowed).max().item()
        if ratio > 1:
            return f"error ratio {ratio:.3g}"
    return ""


GUARD = -1234.0  # exact in every dtype


def run(problem):
    shape, dim, pair, log_mode, forced, forced_columns = problem
    xd, yd = DT[pair[0]], DT[pair[1]]
    x, _ = strided(shape, xd)
    fill(x, shape, dim)
    in_place = pair[0] == pair[1] and rng.random() < 0.1
    if in_place:
        y, x_before = x, x.clone()
    else:
        # y inside a guarded allocation: every element of it that is not y's must keep GUARD.
        y, y_base = strided(shape, yd)
        y_base.fill_(GUARD)
        y.fill_(math.nan)
    for variable, value in (("SMX_CUDA_LONG_ROWS", forced), ("SMX_CUDA_LONG_COLUMNS", forced_columns)):
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    # Descriptors stay cached (a plan is made when its problem is first seen, under that case's rule), so
    # a problem drawn again later reuses its descriptor after others were made.
    plan = smx.plan(x, dim, dtype=yd, log=log_mode)
    (smx.log_softmax if log_mode else smx.softmax)(x, dim, out=y)
    torch.cuda.synchronize()
    reference_x = x_before if in_place else x
    text = (f"shape={shape} dim={dim} pair={pair} log={log_mode} forced={forced}/{forced_columns} in_place={in_place} "
            f"x strides={tuple(x.stride())} y strides={tuple(y.stride())} plan={plan}")
    error = check(y, reference_x, dim, log_mode)
    if not error and not in_place:
        flat = y_base.reshape(-1)
        offsets = torch.full(shape, y.storage_offset() - y_base.storage_offset(), dtype=torch.int64, device="cuda")
        for d, (size, stride) in enumerate(zip(shape, y.stride())):
            view_shape = [1] * len(shape)
            view_shape[d] = size
            offsets += (torch.arange(size, device="cuda") * stride).reshape(view_shape)
        outside = torch.ones(flat.numel(), dtype=torch.bool, device="cuda")
        outside[offsets.reshape(-1)] = False
        changed = int((flat[outside] != GUARD).sum())
        if changed:
            error = f"{changed} elements outside y changed"
    return error, text, plan


history = []
counts, failures, families = 0, [], {}
deadline = time.time() + SECONDS
while time.time() < deadline:
    if history and rng.random() < 0.25:
        problem = rng.choice(history)  # a problem seen before, after others: plans must not interfere
    else:
        shape, dim = random_problem()
        problem = (shape, dim, rng.choice(PAIRS), rng.random() < 0.5, rng.choice(FORCED), rng.choice(FORCED_COLUMNS))
        if problem[2][0] == "f64" and problem[4] is not None:
            problem = problem[:4] + (None,) + problem[5:]
    try:
        error, text, plan = run(problem)
    except Exception as exc:  # noqa: BLE001
        error, text, plan = f"{type(exc).__name__}: {str(exc)[:300]}", str(problem), "?"
    counts += 1
    family = plan.split()[1] if plan.startswith("cuda ") else plan
    families[family] = families.get(family, 0) + 1
    history.append(problem)
    if error:
        failures.append((error, text))
        print("FAIL", error, "|", text, flush=True)
        if len(failures) >= 20:
            break
print(f"seed {SEED}: {counts} cases, {len(failures)} failures; plans: {sorted(families.items())}")
