"""Configurations the vendors publish against the search's answer under the same model.

Run: ``python -m bench.published_configs``.

Each configuration is priced as published, then the same problem is searched (`auto`, 30 s at most): the ratio is the
published latency over the answer's, measured in one run. `tests/costmodels/test_published_configs.py` checks that
each is legal and that the answer is proven and no worse.

Sources (their values copied here):
- AWS NKI: aws-neuron/nki-samples `src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py`
  (`nki_matmul_basic_` 64x128x512; `nki_matmul_tiled_`, `..._hoist_load_`, `..._block_free_dimension_`,
  `..._fully_optimized_` with TILES_IN_BLOCK_M/N/K = 16/2/8 on lhsT [K, M] = [1024, 4096] and rhs [1024, 2048]; tiles
  TILE_M/K/N = 128/128/512). One NeuronCore each, so ``cores_per_chip`` 1.
- Huawei catlass: `examples/00_basic_matmul/basic_matmul.cpp` (L1TileShape GemmShape<128, 256, 256>, L0TileShape
  GemmShape<128, 256, 64>, f16, ping-pong) on its README's 256x512x1024; the autotune example's best
  <64, 128, 128> / <64, 128, 64>. GemmShape is <M, N, K>: base_m/n/k the L0 tile, l1_* the L1 tile over it.
- Second round: tt-metal's Falcon-7B prefill (`models/demos/falcon7b_common/tt/model_config.py`,
  `set_prefill_config`: h_to_4h with in0_block_w 3, HiFi2, fp32_dest_acc_en off; the attention's QK^T / QK^T V on 57
  cores, one of 4 slices of the 71 heads' rows at sequence 1024, K/V shared), its Stable Diffusion conv test
  (`test_conv2d.py::test_sd_conv_wh`: block sharding, act_block_h 32, LoFi, bfloat8_b weights), MobileNetV2's depthwise
  conv (`models/demos/mobilenetv2/tt/ttnn_mobilenetv2.py`), NKI's flash attention (`src/nki_samples/reference/
  attention.py`: QK^T on 128x512 tiles, PV on 128x128 accumulating 16 k tiles) and fp8 double-row matmul
  (`double_row_matmul.py`, K tiles of 256; blocks 16/2/4 ours), catlass's `01_batched_matmul` and `12_quant_matmul`
  (int8, L1 <128, 256, 512>, L0 <128, 256, 128>).
- Tenstorrent tt-metal: `tests/ttnn/unit_tests/benchmarks/test_benchmark.py` (`test_matmul_2d_host_perf`: an 8x8
  grid, HiFi2, fp32_dest_acc_en off; results in `tech_reports/GEMM_FLOPS/GEMM_FLOPS.md`), and the ResNet-50 convs of
  its conv2d unit tests (`test_resnet50_conv_wh`: height sharding on the wide layers, block sharding on the deep
  ones), priced here in bf16 at HiFi4 (the preset's fidelity policy).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def gemm(m: int, k: int, n: int, dtype: str = "bf16", out: str | None = None) -> Problem:
    return einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype=dtype, weight="B", out_dtype=out)


def conv(
    batch: int,
    cout: int,
    cin: int,
    side: int,
    kernel: int,
    stride: int,
    pad: int,
    groups: int = 1,
    dtype: str = "bf16",
    weights: str | None = None,
    out: str | None = None,
) -> Problem:
    return conv2d(batch=batch, in_channels=cin, out_channels=cout, input_height=side, input_width=side,
                  kernel=kernel, stride=stride, padding=pad, groups=groups, dtype=dtype, weights_dtype=weights,
                  out_dtype=out)  # fmt: skip


def mixed(m: int, k: int, n: int, weights: str) -> Problem:
    """A bf16 x block-float GEMM with a bf16 output (tt-metal's LLM weights)."""
    return einsum(
        "mk,kn->mn", {"m": m, "k": k, "n": n}, dtype={"A": "bf16", "B": weights}, weight="B", out_dtype="bf16"
    )


NKI = {"stationary": "other", "acc": "psum", "cores": 1, "shard": "m", "tile_stat": 128, "tile_mov": 512,
       "tile_k": 128, "block_stat": 1, "block_mov": 1, "block_k": 1, "order": "smk"}  # fmt: skip
ONE_CORE = {"cores_per_chip": 1}
CATLASS = {"base_m": 128, "base_n": 256, "base_k": 64, "l1_m": 1, "l1_n": 1, "l1_k": 4, "double_buffer": True}
LOW = {"fidelities": ["HiFi2", "HiFi4"], "bf16_accumulation": True}
LOFI = {"fidelities": ["LoFi", "HiFi2", "HiFi4"], "bf16_accumulation": True}


def tt(layout: str, memory: str, abh: int, ibw: int, sb: str, fid: str = "HiFi4", fp32: bool = True,
       db: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"layout": layout, "memory": memory, "act_block_h": abh, "act_block_w_div": 1, "in0_block_w": ibw,
            "out_subblock": sb, "act_double_buffer": db, "weights_double_buffer": db, "split_reader": False,
            "math_fidelity": fid, "fp32_acc": fp32}  # fmt: skip


#: (label, preset, overrides, problem, point: the target's parameters or its own knobs)
LEGAL: list[tuple[str, str, dict[str, Any] | None, Problem, dict[str, Any]]] = [
    ("nki basic 64x128x512", "trn2", ONE_CORE, gemm(64, 128, 512), {**NKI, "tile_stat": 64}),
    ("nki basic 64x128x512", "trn1", ONE_CORE, gemm(64, 128, 512), {**NKI, "tile_stat": 64}),
    ("nki tiled", "trn2", ONE_CORE, gemm(4096, 1024, 2048), NKI),
    ("nki hoist_load", "trn2", ONE_CORE, gemm(4096, 1024, 2048), {**NKI, "block_k": 8}),
    ("nki block_free_dimension", "trn1", ONE_CORE, gemm(4096, 1024, 2048),
     {**NKI, "block_stat": 2, "block_mov": 2, "block_k": 8}),
    ("nki fully_optimized 16/2/8", "trn2", ONE_CORE, gemm(4096, 1024, 2048),
     {**NKI, "block_stat": 16, "block_mov": 2, "block_k": 8, "order": "mks", "acc": "sbuf"}),
    ("catlass basic_matmul", "ascend-910b", None, gemm(256, 1024, 512, "f16", "f16"),
     {**CATLASS, "core_grid": "1x2x2"}),
    ("catlass autotune best", "ascend-910b", None, gemm(256, 1024, 512, "f16", "f16"),
     {**CATLASS, "base_m": 64, "base_n": 128, "l1_k": 2, "core_grid": "1x4x4"}),
    ("tt-metal GEMM_FLOPS 1024^3", "wormhole-n150", LOW, gemm(1024, 1024, 1024),
     tt("block/8x8", "l1-sharded", 128, 4, "2x4", "HiFi2", False, True)),
    ("tt-metal GEMM_FLOPS 4096^3 DRAM", "wormhole-n150", LOW, gemm(4096, 4096, 4096, out="bf16"),
     tt("block/8x8", "dram-interleaved", 512, 4, "1x8", "HiFi2", False, True)),
    ("tt-metal rn50 stem folded", "wormhole-n150", None, conv(16, 64, 16, 115, 4, 1, 0),
     tt("height/56", "l1-sharded", 256, 1, "1x2")),
    ("tt-metal rn50 layer1 3x3", "wormhole-n150", None, conv(16, 64, 64, 56, 3, 1, 1),
     tt("height/56", "l1-sharded", 896, 1, "1x2")),
    ("tt-metal rn50 layer3 3x3/2 block", "wormhole-n150", None, conv(16, 256, 256, 28, 3, 2, 1),
     tt("block/7x8", "l1-sharded", 448, 1, "1x1")),
    ("falcon7b h_to_4h", "wormhole-n150", LOW, mixed(1024, 4608, 18432, "bfloat8_b"),
     tt("block/8x8", "dram-interleaved", 128, 3, "1x8", "HiFi2", False)),
    ("falcon7b QK^T slice", "wormhole-n150", LOW, gemm(18176, 64, 1024, out="bf16"),
     tt("height/57", "l1-sharded", 320, 2, "1x1", "HiFi2", False)),
    ("falcon7b QK^T V slice", "wormhole-n150", LOW, gemm(18176, 1024, 64, out="bf16"),
     tt("height/57", "l1-sharded", 320, 32, "1x2", "HiFi2", False)),
    ("sd conv 640->320 3x3 block", "wormhole-n150", LOFI,
     conv(2, 320, 640, 64, 3, 1, 1, weights="bfloat8_b", out="bf16"),
     tt("block/8x5", "l1-sharded", 32, 1, "1x2", "LoFi", False)),
    ("mobilenetv2 depthwise 3x3", "wormhole-n150", None,
     conv(1, 32, 32, 112, 3, 1, 1, groups=32, dtype="bfloat8_b", out="bf16"),
     tt("height/56", "l1-sharded", 224, 1, "1x1")),
    ("nki flash attention QK^T", "trn2", ONE_CORE,
     einsum("qd,kd->qk", {"q": 4096, "k": 4096, "d": 128}, dtype="bf16", weight="B"), {**NKI, "block_mov": 4}),
    ("nki flash attention PV", "trn2", ONE_CORE,
     einsum("qk,kd->qd", {"q": 4096, "k": 4096, "d": 128}, dtype="bf16", weight="B"),
     {**NKI, "tile_mov": 128, "block_k": 16}),
    ("nki fp8 double-row", "trn2", ONE_CORE, gemm(4096, 1024, 2048, "f8e4m3"),
     {**NKI, "tile_k": 256, "block_stat": 16, "block_mov": 2, "block_k": 4, "order": "skm", "acc": "sbuf"}),
    ("catlass batched matmul", "ascend-910b", None,
     einsum("bmk,bkn->bmn", {"b": 5, "m": 256, "k": 1024, "n": 512}, dtype="f16", weight="B", out_dtype="f16"),
     {**CATLASS, "core_grid": "5x2x2"}),
    ("catlass int8 quant matmul", "ascend-910b", None, gemm(256, 1024, 512, "i8", "i32"),
     {**CATLASS, "base_k": 128, "core_grid": "1x2x2"}),
]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    t_start = time.perf_counter()
    print(f"{'configuration':34s} {'target':14s} {'published s':>12s} {'answer s':>12s} {'ratio':>7s}  proven  search")
    for label, preset, overrides, problem, point in LEGAL:
        target = get_target(preset, overrides)
        published = target.cost(problem, target.mapping(problem, point)).objective("latency")
        t0 = time.perf_counter()
        r = tune(problem, target, SearchSettings(max_seconds=30, seed=0), validate=False)
        secs = time.perf_counter() - t0
        ours = r.values["latency"]
        print(f"{label:34s} {preset:14s} {published:12.4e} {ours:12.4e} x{published / ours:6.2f}  "
              f"{'yes' if r.proven_optimal else 'no':6s}  {secs:.2f} s", flush=True)  # fmt: skip
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
