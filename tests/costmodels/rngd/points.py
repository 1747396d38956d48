"""The RNGD test suite's base mapping point: one slice, 8 rows, a 32-element K packet, no shift-reuse."""

from __future__ import annotations

from costmodels.protocol import Choice

BASE: dict[str, Choice] = dict(
    packet_k=32,
    packet_free="m",
    rows=8,
    inner="n",
    trf_split=1,
    double_buffer=False,
    clusters=1,
    cluster_role="m",
    slice_grid=1,
    slice_role="m",
    feed_flits=2,
    shift=False,
)
