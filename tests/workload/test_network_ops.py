"""The max pool and the residual adds put back between a conv list's layers (`workload.network_ops`)."""

from __future__ import annotations

from workload import named
from workload.conv2d import conv2d
from workload.network_ops import NetworkOp, with_network_ops


def _conv(ci: int, co: int, h: int, label: str, k: int = 1, stride: int = 1) -> object:
    return conv2d(batch=2, in_channels=ci, out_channels=co, input_height=h, input_width=h, kernel=k, stride=stride,
                  padding=k // 2, label=label)  # fmt: skip


def test_resnet50_gets_its_stem_pool_and_sixteen_adds() -> None:
    ps = named.load("resnet50", batch=2)
    items = with_network_ops(ps)
    ops = [x for x in items if isinstance(x, NetworkOp)]
    assert [o.kind for o in ops].count("maxpool") == 1 and [o.kind for o in ops].count("add") == 16
    pool = items[1]
    assert isinstance(pool, NetworkOp) and pool.label == "resnet50/maxpool"
    assert (pool.dims, pool.out_dims, pool.kernel, pool.stride, pool.padding) == (
        (2, 112, 112, 64), (2, 56, 56, 64), 3, 2, 1
    )  # fmt: skip
    # each add closes its block, after the projection when there is one, on the block's output tensor
    labels = [x.label.removeprefix("resnet50/") for x in items]
    i = labels.index("layer2.0.add")
    assert labels[i - 1] == "layer2.0.downsample" and labels[i + 1] == "layer2.1.conv1"
    assert items[i].dims == (2, 28, 28, 512)  # type: ignore[union-attr]
    assert [x for x in items if not isinstance(x, NetworkOp)] == ps  # the convs, unchanged and in order


def test_blocks_that_are_not_residual_get_no_add() -> None:
    chain = [_conv(32, 64, 14, "b.0.conv1"), _conv(64, 64, 14, "b.0.conv2", k=3, stride=2)]  # 14x14x32 -> 7x7x64
    assert with_network_ops(chain) == chain  # type: ignore[arg-type]
    identity = [_conv(64, 32, 14, "b.0.conv1"), _conv(32, 64, 14, "b.0.conv2", k=3)]
    out = with_network_ops(identity)  # type: ignore[arg-type]
    assert isinstance(out[-1], NetworkOp) and out[-1].kind == "add" and out[-1].label == "b.0.add"
    # a pool needs the 3x3/2 shape and the same channels
    other = [_conv(8, 64, 28, "stem"), _conv(64, 64, 13, "b.0.conv1")]
    assert not any(isinstance(x, NetworkOp) for x in with_network_ops(other))  # type: ignore[arg-type]
