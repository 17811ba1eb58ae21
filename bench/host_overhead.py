"""Host time per call of smx.softmax, torch.ops.smx.softmax and torch.softmax (or, with --op, their log_softmax)
on small tensors, plain and with out=: the overhead a PyTorch user pays on every call whose kernel is shorter
than the call itself.

    cd <repo> && SMX_LIBRARY=build/src/libsmx.so python3 bench/host_overhead.py [--json PATH]

Each sample times `--calls` back-to-back calls (host time until the last one returns: the enqueue cost on a
GPU), then synchronizes once (the "with sync" column adds that wait, so a case the device cannot keep up with
shows there). The callers take turns sample by sample, so drift hits them alike; the table gives the median
over `--samples` samples, and the median of the paired differences smx - torch (same round), the comparison that
drift does not move. On a machine without a GPU it runs on CPU tensors (a smoke run: host time there is
mostly the computation). SMX_TORCH_EXTENSION=0 in the environment times the operators' Python kernels.
Each shape's line names the plan libsmx runs it with (a cooperative or two-kernel launch costs more host time
than one plain launch)."""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "python"))
import smx  # noqa: E402
import smx.torch  # noqa: E402  (defines torch.ops.smx: built or loaded before anything is timed)

SHAPES = [((8, 32000), torch.float32), ((32, 8, 1, 128), torch.float32), ((64, 1000), torch.float32),
          ((128, 8192), torch.float16)]


def parse_shape(text):
    """'64x1000:float32' -> ((64, 1000), torch.float32)."""
    dims, _, dtype = text.partition(":")
    return tuple(int(size) for size in dims.split("x")), getattr(torch, dtype or "float32")


def callers(op, x, out):
    """name -> (plain call, call with out=), each computing op ('softmax' or 'log_softmax') along the last dim."""
    torch_function, smx_function, smx_torch_function = getattr(torch, op), getattr(smx, op), getattr(smx.torch, op)
    operator, operator_out = getattr(torch.ops.smx, op).default, getattr(torch.ops.smx, op).out
    by_name = {
        f"torch.{op}": (lambda: torch_function(x, -1), lambda: torch_function(x, -1, out=out)),
        f"torch.ops.smx.{op}": (lambda: operator(x, -1), lambda: operator_out(x, -1, y=out)),
        f"smx.{op}": (lambda: smx_function(x, -1), lambda: smx_function(x, -1, out=out)),
        f"smx.torch.{op}": (lambda: smx_torch_function(x, -1), lambda: smx_torch_function(x, -1, out=out)),
    }
    binding = smx.torch._binding
    if binding is not None:
        # What smx.softmax calls in eager mode, without smx.softmax's own Python around it.
        eager = getattr(binding, op)
        by_name["smx binding"] = (lambda: eager(x, -1, None, None), lambda: eager(x, -1, None, out))
    # The ctypes binding's own call, which NumPy and CuPy arrays still take: the cost the operators remove.
    mode = 1 if op == "softmax" else 2
    by_name["smx ctypes path"] = (lambda: smx._forward(x, -1, None, None, None, mode),
                                  lambda: smx._forward(x, -1, None, out, None, mode))
    return by_name


def time_cases(cases, calls, samples, warm_up, synchronize):
    """{name: (host us per call samples, with-sync us per call samples)} over round-robin samples."""
    for call in cases.values():
        for _ in range(warm_up):
            call()
    synchronize()
    host = {name: [] for name in cases}
    with_sync = {name: [] for name in cases}
    for _ in range(samples):
        for name, call in cases.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            enqueued = time.perf_counter()
            synchronize()
            done = time.perf_counter()
            host[name].append((enqueued - start) / calls * 1e6)
            with_sync[name].append((done - start) / calls * 1e6)
    return {name: (host[name], with_sync[name]) for name in cases}


def paired_difference(timings, name, reference):
    """Median over samples of name's host time minus reference's in the same round: the two ran back to back,
    so drift between rounds (the machine's other load, clock changes) cancels, where the two medians of
    samples each keep it."""
    return statistics.median(a - b for a, b in zip(timings[name][0], timings[reference][0]))


def commit():
    """$SMX_COMMIT (a tree copied without its history, as on a GPU machine), else git's HEAD."""
    if os.environ.get("SMX_COMMIT"):
        return os.environ["SMX_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--calls", type=int, help="calls per sample (default: 1000 on a GPU, 20 on the CPU)")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--warm-up", type=int, default=100)
    parser.add_argument("--shape", type=parse_shape, action="append", metavar="AxB[:DTYPE]",
                        help="time this shape instead of the default four (repeatable), e.g. 4x8:float32")
    parser.add_argument("--op", choices=["softmax", "log_softmax"], action="append",
                        help="time this operation (repeatable; default: softmax)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    arguments = parser.parse_args()
    device = arguments.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    calls = arguments.calls or (1000 if device == "cuda" else 20)
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    device_name = torch.cuda.get_device_name() if device == "cuda" else (platform.processor() or platform.machine())
    header = {"device": device, "device_name": device_name, "torch": torch.__version__, "commit": commit(),
              "libsmx": smx.library_path(), "backend": smx.torch.backend(),
              "binding": smx.torch._binding is not None, "calls": calls, "samples": arguments.samples,
              "python": platform.python_version()}
    print(f"{device_name} ({device}), torch {torch.__version__}, smx {header['commit']}, operators: "
          f"{header['backend']}{' with the eager binding' if header['binding'] else ''}, libsmx {header['libsmx']}")
    print(f"host us per call, median of {arguments.samples} samples of {calls} back-to-back calls "
          "(in brackets: with the final synchronize)")
    results = []
    comparisons = []
    for shape, dtype in arguments.shape or SHAPES:
        generator = torch.Generator(device=device).manual_seed(0)
        x = (torch.randn(shape, generator=generator, device=device) * 3).to(dtype)
        out = torch.empty_like(x)
        for op in arguments.op or ["softmax"]:
            plan = smx.plan(x, log=op == "log_softmax")
            print(f"{'x'.join(map(str, shape))} {str(dtype).replace('torch.', '')} {op}: {plan}")
            by_caller = callers(op, x, out)
            for variant, index in (("plain", 0), ("out=", 1)):
                cases = {name: pair[index] for name, pair in by_caller.items()}
                timings = time_cases(cases, calls, arguments.samples, arguments.warm_up, synchronize)
                label = f"{'x'.join(map(str, shape))} {str(dtype).replace('torch.', '')} {variant}"
                paired = paired_difference(timings, f"smx.{op}", f"torch.{op}")
                row = []
                for name, (host, with_sync) in timings.items():
                    median, median_sync = statistics.median(host), statistics.median(with_sync)
                    row.append(f"{name} {median:6.2f} ({median_sync:6.2f})")
                    results.append({"shape": list(shape), "dtype": str(dtype).replace("torch.", ""), "op": op,
                                    "variant": variant, "plan": plan, "caller": name, "host_us": median,
                                    "with_sync_us": median_sync, "host_samples_us": host,
                                    "with_sync_samples_us": with_sync})
                print(f"{label:28s} " + " | ".join(row) + f" | smx - torch paired {paired:+6.2f}")
                comparisons.append({"shape": list(shape), "dtype": str(dtype).replace("torch.", ""), "op": op,
                                     "variant": variant, "smx_minus_torch_paired_us": paired})
    if arguments.json:
        arguments.json.write_text(json.dumps({**header, "results": results, "comparisons": comparisons}, indent=1) + "\n")
        print(f"wrote {arguments.json}")


if __name__ == "__main__":
    main()
