"""The halo validation's memory estimate bounds its traced peak, so the cap it is checked against
keeps `validate_as_run`'s halo path bounded (issue #13)."""

from __future__ import annotations

import tracemalloc

import pytest

from costmodels.tenstorrent.halo import build_halo
from executor.validate import halo_estimate_bytes, validate_sharded_conv
from workload.conv2d import as_conv2d, conv2d


@pytest.mark.parametrize("cores", [1, 7])
def test_halo_estimate_bounds_the_traced_peak(cores: int) -> None:
    p = conv2d(
        batch=2, in_channels=32, out_channels=16, input_height=28, input_width=28, kernel=(3, 3), stride=(1, 1),
        padding=(1, 1), dilation=(1, 1), groups=1, dtype="bf16",
    )  # fmt: skip
    params = as_conv2d(p)
    assert params is not None
    config = build_halo(params, cores, tile=1)
    tracemalloc.start()
    try:
        report = validate_sharded_conv(p, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.passed and report.method == "halo"
    assert peak <= halo_estimate_bytes(p, config)
    with pytest.raises(ValueError, match="over the"):
        validate_sharded_conv(p, config, memory_cap_bytes=peak // 4)
