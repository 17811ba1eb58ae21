"""Host time per smx.softmax call through the Python binding, on a small CUDA problem (64 x 1000 f32, out=
given) whose kernel is far shorter than the call: a torch tensor on the current stream, an array read
through __cuda_array_interface__ and launched on the stream it names, and the same array launched on
another stream (its stream then ordered before and after the launch by events: smx/_streams.py).

    cd <repo> && SMX_LIBRARY=build/src/libsmx.so python3 bench/probes/python_call_overhead.py

Prints, per case, the median over 5 samples of 2000 back-to-back calls (GPU synchronized between
samples, 200 calls of warm-up)."""

import sys
import time
from pathlib import Path

import numpy as np
import torch

_ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(_ROOT / "python"), str(_ROOT / "python" / "tests")]
import smx  # noqa: E402
from test_cuda import InterfaceArray  # noqa: E402  (the tests' torch tensor seen only through the interface)

CALLS, SAMPLES, WARM_UP = 2000, 5, 200


def main():
    x = torch.randn(64, 1000, device="cuda")
    out = torch.empty_like(x)
    producer, launch = torch.cuda.Stream(), torch.cuda.Stream()
    cases = {
        "torch tensor, current stream": lambda: smx.softmax(x, out=out),
        "interface array, its own stream": lambda: smx.softmax(InterfaceArray(x, producer.cuda_stream),
                                                               out=InterfaceArray(out, None)),
        "interface array, stream= another": lambda: smx.softmax(InterfaceArray(x, producer.cuda_stream),
                                                                out=InterfaceArray(out, None), stream=launch),
    }
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, libsmx {smx.library_path()}")
    for name, call in cases.items():
        for _ in range(WARM_UP):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(SAMPLES):
            start = time.perf_counter()
            for _ in range(CALLS):
                call()
            samples.append((time.perf_counter() - start) / CALLS * 1e6)
            torch.cuda.synchronize()
        print(f"{name:34s} median {np.median(samples):6.2f} us per call "
              f"(samples {', '.join(f'{sample:.2f}' for sample in samples)})")


if __name__ == "__main__":
    main()
