#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_c_api.cpp into fuzz/corpus/: one small file per case below.

The byte format is described at the top of fuzz_c_api.cpp; encode() is its inverse. Rerun after changing
the format: `python3 fuzz/make_corpus.py` (it replaces the directory's contents).
"""
import pathlib
import struct

F16, BF16, F32, F64 = 1, 2, 3, 4
SOFTMAX, LOG_SOFTMAX = 1, 2
X_STRIDES, Y_STRIDES, IN_PLACE, SHIFTED, X_NULL, Y_NULL, SHAPE_NULL, SHORT_WORKSPACE = (1 << b for b in range(8))
HUGE, NEG_HUGE = 0x7FFF, -0x8000

# Finite values, in a spread of magnitudes, as float32 bits: the data tail.
FINITE = struct.pack("<8f", 0.5, -1.25, 3.0, -7.5, 0.0, 2.0, -0.125, 9.0)
# float32 NaN, +inf, -inf among finite values.
SPECIAL = struct.pack("<8I", 0x7FC00000, 0x3F800000, 0x7F800000, 0xFF800000, 0x40000000, 0xFF800000, 0xFF800000, 0xFF800000)


def encode(shape, x_dtype=F32, y_dtype=F32, mode=SOFTMAX, axis=-1, flags=0, shift=0, x_strides=None,
           y_strides=None, data=FINITE, ndim=None):
    ndim = len(shape) if ndim is None else ndim
    x_strides = x_strides or [0] * len(shape)
    y_strides = y_strides or [0] * len(shape)
    out = bytes([ndim, x_dtype, y_dtype, mode, axis & 0xFF, flags, shift])
    out += bytes(d & 0xFF for d in shape)
    out += b"".join(struct.pack("<h", s) for s in x_strides + y_strides)
    return out + data


CASES = {
    "rows_f32": encode([4, 8]),
    "rows_log_f32": encode([4, 8], mode=LOG_SOFTMAX),
    "rows_f16_to_f32": encode([3, 16], x_dtype=F16),
    "rows_bf16_to_f16": encode([3, 16], x_dtype=BF16, y_dtype=F16),
    "rows_f32_to_bf16_log": encode([2, 33], y_dtype=BF16, mode=LOG_SOFTMAX),
    "rows_f64": encode([5, 7], x_dtype=F64, y_dtype=F64),
    "pair_f64_to_f32_unsupported": encode([2, 4], x_dtype=F64, y_dtype=F32),
    "spatial_axis1": encode([2, 5, 3], axis=1),
    "outer_axis0": encode([6, 2, 2], axis=0, mode=LOG_SOFTMAX),
    "transposed_strides": encode([3, 4], flags=X_STRIDES | Y_STRIDES, x_strides=[1, 3], y_strides=[1, 3]),
    "negative_strides": encode([3, 4], flags=X_STRIDES, x_strides=[-4, -1]),
    "mixed_strides_8d": encode([2, 1, 2, 1, 2, 1, 2, 2], flags=X_STRIDES, x_strides=[-1, 5, 2, 0, 7, 3, -9, 11]),
    "broadcast_x": encode([4, 6], flags=X_STRIDES, x_strides=[0, 1]),
    "zero_stride_y": encode([4, 6], flags=Y_STRIDES, y_strides=[0, 1]),
    "overlapping_y_strides": encode([4, 6], flags=Y_STRIDES, y_strides=[2, 1]),
    "in_place": encode([4, 8], flags=IN_PLACE),
    "in_place_different_strides": encode([4, 8], flags=IN_PLACE | Y_STRIDES, y_strides=[1, 4]),
    "partial_overlap": encode([4, 8], flags=SHIFTED, shift=16),
    "misaligned_y": encode([2, 8], flags=SHIFTED, shift=3),
    "axis_size_1": encode([7, 1]),
    "empty": encode([0, 5]),
    "special_values": encode([4, 8], data=SPECIAL),
    "special_values_log": encode([4, 8], mode=LOG_SOFTMAX, data=SPECIAL),
    "ndim_0": encode([], ndim=0),
    "ndim_9": encode([1] * 9),
    "dtype_invalid": encode([2, 2], x_dtype=0, y_dtype=5),
    "mode_invalid": encode([2, 2], mode=3),
    "axis_out_of_range": encode([2, 2], axis=2),
    "axis_negative_out_of_range": encode([2, 2], axis=-3),
    "shape_negative": encode([2, -3]),
    "shape_null": encode([2, 3], flags=SHAPE_NULL),
    "huge_strides": encode([3, 3], flags=X_STRIDES, x_strides=[HUGE, 1]),
    "negative_huge_strides": encode([3, 3], flags=X_STRIDES | Y_STRIDES, x_strides=[NEG_HUGE, 1], y_strides=[1, HUGE]),
    "x_null": encode([2, 4], flags=X_NULL),
    "y_null": encode([2, 4], flags=Y_NULL),
    "null_with_empty": encode([0, 4], flags=X_NULL | Y_NULL),
    "short_workspace": encode([2, 4], flags=SHORT_WORKSPACE),
}


def main():
    corpus = pathlib.Path(__file__).resolve().parent / "corpus"
    corpus.mkdir(exist_ok=True)
    for old in corpus.glob("*"):
        old.unlink()
    for name, content in CASES.items():
        (corpus / name).write_bytes(content)
    print(f"wrote {len(CASES)} seeds to {corpus}")


if __name__ == "__main__":
    main()
