"""Encode many texts in calls of similar length (the encoder pads to a call's longest text), each call
sized in characters at the rate measured so far, so that it takes a few seconds and progress lines come on
time."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np


class CallSizer:
    """How many texts the next encode call takes: what the machine encodes in `target_s` at the rate measured so
    far (characters per second), at least `least` and at most `most` texts; `first` texts before any measurement.
    One sizer is kept across the batches of a build, so the rate carries over."""

    def __init__(self, target_s: float, most: int, *, least: int = 32, first: int = 64):
        self.target_s, self.most = target_s, max(1, most)
        self.least, self.first = min(least, self.most), min(first, self.most)
        self.chars_per_s: float | None = None

    def take(self, lengths: Sequence[int], begin: int) -> int:
        """Texts for the call that starts at `begin` of `lengths` (characters of the texts, in encoding order)."""
        left = len(lengths) - begin
        if self.chars_per_s is None:
            return min(self.first, left)
        budget = self.chars_per_s * self.target_s
        count, total = 0, 0
        while count < left and count < self.most:
            total += lengths[begin + count]
            if count >= self.least and total > budget:
                break
            count += 1
        return max(1, count)

    def observe(self, chars: int, seconds: float) -> None:
        if chars > 0 and seconds > 0:
            self.chars_per_s = chars / seconds


def encode_in_length_order(
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    dim: int,
    sizer: CallSizer,
    on_call: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Vectors of `texts` in their input order, encoded shortest first in calls sized by `sizer`; `on_call(n,
    chars)` after each call (progress: texts and characters encoded)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    lengths = [len(texts[i]) for i in order]
    out = np.zeros((len(texts), dim), dtype=np.float32)
    begin = 0
    while begin < len(order):
        count = sizer.take(lengths, begin)
        chosen = order[begin : begin + count]
        started = time.perf_counter()
        vectors = encode([texts[i] for i in chosen])
        chars = sum(lengths[begin : begin + count])
        sizer.observe(chars, time.perf_counter() - started)
        out[chosen] = np.asarray(vectors, dtype=np.float32).reshape(count, dim)
        begin += count
        if on_call is not None:
            on_call(count, chars)
    return out


def padded_inputs(encodings, input_names, pad_id: int) -> dict[str, np.ndarray]:
    """The model inputs of a batch of `tokenizers` encodings, padded to the batch's longest."""
    width = max(len(e.ids) for e in encodings)
    feeds = {}
    for name, attribute, pad in (
        ("input_ids", "ids", pad_id),
        ("attention_mask", "attention_mask", 0),
        ("token_type_ids", "type_ids", 0),
    ):
        if name in input_names:
            matrix = np.full((len(encodings), width), pad, dtype=np.int64)
            for row, encoding in enumerate(encodings):
                values = getattr(encoding, attribute)
                matrix[row, : len(values)] = values
            feeds[name] = matrix
    return feeds
