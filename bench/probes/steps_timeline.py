#!/usr/bin/env python3
"""steps_timeline.py - where each step of the grid-regs-steps kernel spends its time (perf-notes run 103).

A throw-away instrumented build: `patch` rewrites src/cuda/block_regs_softmax.cu in place so that thread 0
of every CTA stamps clock64() at each phase of each step (and %globaltimer at each step's start, to place
the SMs' clocks on one time line); `read` runs a few shapes through the Python binding and prints, per
step, when the CTAs reached each phase and the median time each phase took. Never build a library you ship
from a patched tree: the stamps cost registers and stores.

    cp src/cuda/block_regs_softmax.cu /tmp/kept.cu
    python3 bench/probes/steps_timeline.py patch src/cuda/block_regs_softmax.cu
    cmake --build build --target smx
    SMX_LIBRARY=$PWD/build/src/libsmx.so python3 bench/probes/steps_timeline.py read
    cp /tmp/kept.cu src/cuda/block_regs_softmax.cu

The patch is pattern-based and refuses (AssertionError) when a pattern is not found exactly once, so a
kernel that has changed shape fails loudly instead of being stamped in the wrong places.

Phases per CTA and step (slot: the stamp taken after it):
  0 step start, 1 staged slice landed, 2 packs in registers (CTA barrier), 3 CTA statistics,
  4 grid barrier passed, 5 row statistics folded, 6 stores issued; slot 7 holds %globaltimer at the start.
Step 31's slots hold the SM id, the end %globaltimer, the end clock and the step count.
"""

import ctypes
import os
import statistics
import sys

MAX_CTAS = 512
MAX_STEPS = 31  # steps past this are not stamped; slot row 31 is the CTA's summary
SLOTS = 8

DEVICE_CODE = f"""
__device__ unsigned long long g_steps_timeline[{MAX_CTAS} * 32 * {SLOTS}];
__device__ __forceinline__ unsigned long long timeline_now() {{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}}
#define TIMELINE_SLOT(step_, slot_) g_steps_timeline[(blockIdx.x * 32 + (step_)) * {SLOTS} + (slot_)]
#define TIMELINE_STAMP(slot_) do {{ if constexpr (kRowSteps) {{ \\
    if (threadIdx.x == 0 && blockIdx.x < {MAX_CTAS} && step < {MAX_STEPS}) TIMELINE_SLOT(step, slot_) = clock64(); }} }} while (0)
"""

STEP_START = f"""TIMELINE_STAMP(0);
        if constexpr (kRowSteps) {{
            if (threadIdx.x == 0 && blockIdx.x < {MAX_CTAS} && step < {MAX_STEPS}) TIMELINE_SLOT(step, 7) = timeline_now();
        }}
"""

STEP_END = f"""TIMELINE_STAMP(6);
        if constexpr (kRowSteps) {{
            if (threadIdx.x == 0 && blockIdx.x < {MAX_CTAS} && step == steps - 1) {{
                unsigned sm;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
                TIMELINE_SLOT(31, 0) = sm;
                TIMELINE_SLOT(31, 1) = timeline_now();
                TIMELINE_SLOT(31, 2) = clock64();
                TIMELINE_SLOT(31, 3) = steps;
            }}
        }}
"""

READER = """
extern "C" __attribute__((visibility("default"))) int smx_debug_steps_timeline(unsigned long long* host, int count) {
    return static_cast<int>(cudaMemcpyFromSymbol(host, smx::cuda::g_steps_timeline, sizeof(unsigned long long) * count));
}
"""


def patch(path):
    source = open(path).read()

    def replace_once(old, new):
        nonlocal source
        assert source.count(old) == 1, f"pattern not found exactly once: {old!r}"
        source = source.replace(old, new)

    def after(anchor, text):
        replace_once(anchor, anchor + text)

    after("namespace smx::cuda {\n", DEVICE_CODE)
    after("    for (int step = 0; step < steps; ++step) {\n", "        " + STEP_START)
    after("            bulk_barrier_wait(&stage_landed, static_cast<unsigned>(step) & 1u);\n",
          "            TIMELINE_STAMP(1);\n")
    after("            __syncthreads();  // every thread has its packs: the stage may take the next step's\n",
          "            TIMELINE_STAMP(2);\n")
    after("        Stats<C> stats = block_stats_to(Stats<C>{thread_max, thread_sum}, warp_partials, &exchange);\n",
          "        TIMELINE_STAMP(3);\n")
    after("            cooperative_groups::this_grid().sync();\n", "            TIMELINE_STAMP(4);\n")
    grid_fold_end = "            row_stats = cluster_stats;\n        } else if (ranks > 1) {\n"
    replace_once(grid_fold_end, grid_fold_end.replace("        } else", "            TIMELINE_STAMP(5);\n        } else"))
    after("        if (has_edge) y_slice[edge_index] = StoreAs<Y>::from(edge);\n", "        " + STEP_END)
    anchor = "}  // namespace smx::cuda\n"
    assert source.endswith(anchor), "the file no longer ends with the namespace"
    source += READER
    open(path, "w").write(source)


CASES = [((4, 4194304), False), ((4, 4194304), True), ((16, 1048576), False), ((64, 1048576), False),
         ((2, 4194304), False)]


def read():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import torch
    import smx

    library = ctypes.CDLL(os.environ["SMX_LIBRARY"])
    words = MAX_CTAS * 32 * SLOTS
    buffer = (ctypes.c_ulonglong * words)()
    for shape, log in CASES:
        inputs = [3 * torch.randn(shape, device="cuda") for _ in range(3)]  # 3 x 67 MB > L2 at the largest
        outputs = [torch.empty_like(x) for x in inputs]
        forward = smx.log_softmax if log else smx.softmax
        plan = str(smx.plan(inputs[0], -1, log=log))
        fields = dict(word.split("=") for word in plan.split() if "=" in word)
        ctas = min(int(fields["chunks"]) * int(fields["rows_per_step"]), MAX_CTAS)
        for i in range(12):
            forward(inputs[i % 3], -1, out=outputs[i % 3])
        torch.cuda.synchronize()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        events[0].record()
        for i in range(20):  # the stamps read back are the last call's
            forward(inputs[i % 3], -1, out=outputs[i % 3])
        events[1].record()
        torch.cuda.synchronize()
        per_call_us = events[0].elapsed_time(events[1]) * 1000 / 20
        assert library.smx_debug_steps_timeline(buffer, words) == 0

        def stamps(cta, step):
            base = (cta * 32 + step) * SLOTS
            return buffer[base:base + SLOTS]

        steps = int(stamps(0, 31)[3])
        # Clock cycles per ns, from each CTA's own clock and %globaltimer spans.
        rates = [(stamps(b, 31)[2] - stamps(b, 0)[0]) / (stamps(b, 31)[1] - stamps(b, 0)[7])
                 for b in range(ctas) if stamps(b, 31)[1] > stamps(b, 0)[7] + 2000]
        ghz = statistics.median(rates)
        origin = min(stamps(b, 0)[7] for b in range(ctas))

        def at(cta, step, slot):  # us since the first CTA started
            first = stamps(cta, 0)
            return ((first[7] - origin) + (stamps(cta, step)[slot] - first[0]) / ghz) / 1000

        sms = {int(stamps(b, 31)[0]) for b in range(ctas)}
        span = max((stamps(b, 31)[1] - origin) / 1000 for b in range(ctas))
        print(f"\n{'log_softmax' if log else 'softmax'} f32 {shape}: {per_call_us:.1f} us per call (20 back-to-back "
              f"calls from Python), kernel span {span:.1f} us, {ctas} CTAs on {len(sms)} SMs, {steps} steps, "
              f"{ghz:.2f} GHz\n  plan: {plan}")
        print("  times in us since the first CTA started (min / median / max over CTAs); phase medians in us")
        print("  step |    start min/med/max | landed med/max | regs med | stats med/max | barrier out min/max |"
              " folded med | stores med/max || wait  regs stats barrier  fold write")
        for step in range(min(steps, MAX_STEPS)):
            column = {slot: sorted(at(b, step, slot) for b in range(ctas)) for slot in range(7)}
            low = lambda slot: column[slot][0]
            mid = lambda slot: column[slot][len(column[slot]) // 2]
            high = lambda slot: column[slot][-1]
            phase = lambda a, b: statistics.median(at(c, step, b) - at(c, step, a) for c in range(ctas))
            print(f"  {step:4d} | {low(0):6.2f} {mid(0):6.2f} {high(0):6.2f} | {mid(1):6.2f} {high(1):6.2f} | "
                  f"{mid(2):6.2f} | {mid(3):6.2f} {high(3):6.2f} | {low(4):6.2f} {high(4):6.2f} | {mid(5):6.2f} | "
                  f"{mid(6):6.2f} {high(6):6.2f} || {phase(0, 1):5.2f} {phase(1, 2):5.2f} {phase(2, 3):5.2f} "
                  f"{phase(3, 4):7.2f} {phase(4, 5):5.2f} {phase(5, 6):5.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "patch":
        patch(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "read":
        read()
    else:
        sys.exit(__doc__)
