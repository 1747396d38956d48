"""The Trainium cost model: the nc_matmul formula table, HBM traffic, eviction, and the NKI guidance."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.protocol import Choice, SearchSpace
from costmodels.registry import get_target
from costmodels.trainium.nest import roles_of
from costmodels.trainium.space import LADDER
from costmodels.trainium.target import TrainiumTarget
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.enumerable import narrowed
from workload.einsum import einsum

ONE: dict[str, Choice] = {
    "stationary": "weight", "tile_stat": 128, "tile_mov": 512, "tile_k": 128, "block_stat": 1, "block_mov": 1,
    "block_k": 1, "order": "smk", "acc": "psum", "cores": 1, "shard": "m",
}  # fmt: skip


def target(name: str) -> TrainiumTarget:
    """A target over the ladder space (`space.LADDER`): these checks enumerate whole spaces, and the formulas
    do not depend on the tiles offered (every tile count: test_trainium_tile_bounds.py)."""
    t = get_target(name)
    assert isinstance(t, TrainiumTarget)
    t.tiles = LADDER
    return t


def sub_columns(space: SearchSpace, keep: dict[str, tuple[Choice, ...]]) -> dict[str, np.ndarray]:
    """The columns of the points of `space` whose values are in `keep` (the same rows, in the same order, as
    filtering `space.columns()`), built from the sub-space instead of the whole product."""
    return narrowed(space, {q.name: tuple(c for c in q.choices if c in keep[q.name]) for q in space.params
                            if q.name in keep}).columns()  # fmt: skip


# nki-nc_matmul.txt, Estimated instruction cost: max(min(64, N_stationary), N_moving) cycles for
# fp8/bf16/fp16/tf32, 4x for fp32. Rows: (N_stationary, N_moving, dtype, cycles from the document's formula).
TABLE = [
    (128, 512, "bf16", 512),
    (128, 128, "bf16", 128),
    (128, 64, "f16", 64),
    (128, 32, "bf16", 64),
    (128, 1, "bf16", 64),
    (32, 32, "bf16", 32),
    (16, 1, "f8e4m3", 16),
    (1, 1, "bf16", 1),
    (100, 300, "bf16", 300),
    (128, 512, "f32", 2048),
    (32, 16, "f32", 128),
]


@pytest.mark.parametrize(("ns", "nm", "dtype", "cycles"), TABLE)
@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_one_instruction_costs_the_documented_cycles(preset: str, ns: int, nm: int, dtype: str, cycles: int) -> None:
    p = einsum("mk,kn->mn", {"m": nm, "k": 128, "n": ns}, dtype=dtype, weight=1)  # n on stationary, m moving
    t = target(preset)
    m = t.mapping(p, ONE)
    assert t.check(p, m) == []
    report = t.cost(p, m)
    assert report.breakdown["compute"] == cycles
    assert f"= {cycles} cycles" in t.render(p, m)


def test_k_tiles_accumulate_and_multiply_the_instruction_count() -> None:
    # nki-nc_matmul.txt: K > 128 accumulates several nc_matmul into one PSUM tile
    p = einsum("mk,kn->mn", {"m": 512, "k": 1024, "n": 128}, dtype="bf16", weight=1)
    t = target("trn1")
    assert t.cost(p, t.mapping(p, ONE)).breakdown["compute"] == 8 * 512


def test_fp8_double_row_halves_the_instructions_on_trn2_only() -> None:
    # hardware-facts.md §2.1 FP8 double-row row: K up to 256 in the time of a bf16 K = 128
    p = einsum("mk,kn->mn", {"m": 512, "k": 1024, "n": 128}, dtype="f8e4m3", weight=1)
    t2, t1 = target("trn2"), target("trn1")
    m2 = t2.mapping(p, {**ONE, "tile_k": 256})
    assert t2.check(p, m2) == [] and m2.knobs["double_row"] is True
    assert t2.cost(p, m2).breakdown["compute"] == 4 * 512
    assert t1.cost(p, t1.mapping(p, ONE)).breakdown["compute"] == 8 * 512


def test_hbm_traffic_matches_the_blocked_schedule_formula() -> None:
    # hardware-facts.md §2.2 step 5: s*(M*K*ceil(N/B_N) + K*N*ceil(M/B_M)) + s_out*M*N with K blocked inside
    mm, kk, nn = 1024, 1024, 1024
    p = einsum("mk,kn->mn", {"m": mm, "k": kk, "n": nn}, dtype="bf16", out_dtype="bf16", weight=1)
    t = target("trn1")
    point = {**ONE, "acc": "sbuf", "block_stat": 2, "block_mov": 1, "block_k": 2}  # B_N = 256, B_M = 512
    r = t.cost(p, t.mapping(p, point))
    expected = 2 * (mm * kk * (nn // 256) + kk * nn * (mm // 512)) + 2 * mm * nn
    assert r.bytes["hbm"] == expected == r.offchip_bytes


def test_blocks_kept_across_loops_are_not_refetched() -> None:
    # a full-K block of the moving operand stays in SBUF while the stationary blocks stream past it
    p = einsum("mk,kn->mn", {"m": 512, "k": 512, "n": 1024}, dtype="bf16", out_dtype="bf16", weight=1)
    t = target("trn1")
    r = t.cost(p, t.mapping(p, {**ONE, "order": "msk", "block_k": 4}))
    assert r.bytes["hbm"] == p.min_bytes


def test_psum_eviction_is_n_plus_60_vector_cycles_per_tile() -> None:
    # hardware-facts.md §2.1 Vector/Scalar cost (~N cycles per free size) and SBUF/PSUM access (~60 cycles);
    # §2.2 step 3: T_evict = tiles * (N_t + 60) / f_VE; an SBUF accumulate is a 2-input op (~2N)
    p = einsum("mk,kn->mn", {"m": 1024, "k": 512, "n": 256}, dtype="bf16", weight=1)
    t = target("trn1")
    ratio = 2.8e9 / 1.12e9
    tiles = (1024 // 512) * (256 // 128)
    psum = t.cost(p, t.mapping(p, {**ONE, "block_k": 4}))
    assert psum.breakdown["evict"] == pytest.approx(tiles * (512 + 60) * ratio)
    sbuf = t.cost(p, t.mapping(p, {**ONE, "acc": "sbuf", "block_k": 1}))  # 4 K blocks: 1 copy + 3 adds per tile
    assert sbuf.breakdown["evict"] == pytest.approx(tiles * ((512 + 60) + 3 * (2 * 512 + 60)) * ratio)


def test_cores_share_hbm_and_each_core_is_capped_by_its_dma_engines() -> None:
    # hardware-facts.md §2.2 step 5: BW_core capped at 16 x 27 GiB/s (NC-v2); the chip at 820 GB/s
    p = einsum("k,kn->n", {"k": 8192, "n": 8192}, dtype="bf16", out_dtype="bf16", weight=1)  # memory bound
    t = target("trn1")
    one = t.cost(p, t.mapping(p, {**ONE, "stationary": "weight", "block_k": 16, "cores": 1, "shard": "s"}))
    two = t.cost(p, t.mapping(p, {**ONE, "stationary": "weight", "block_k": 16, "cores": 2, "shard": "s"}))
    assert one.bound == two.bound == "dma"
    assert one.breakdown["dma"] == pytest.approx(one.bytes["hbm"] / (16 * 27 * 2**30) * 2.8e9)
    assert two.breakdown["dma"] == pytest.approx(two.bytes["hbm"] / 820e9 * 2.8e9)


@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_large_bf16_gemm_prefers_128_128_512_tiles_with_blocking(preset: str) -> None:
    # hardware-facts.md §2.1 Tiling guidance (AWS matrix_multiplication.rst): TILE_M=128, TILE_K=128, TILE_N=512
    p = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)
    t = get_target(preset)  # every tile count
    assert isinstance(t, TrainiumTarget)
    found = tune(p, t, SearchSettings(max_seconds=120), validate=False)
    assert found.certificate is not None and found.certificate.unexplored == 0  # proven over every tile count
    assert found.cost is not None
    best = found.cost.seconds
    point = found.point
    assert (point["tile_stat"], point["tile_k"], point["tile_mov"]) == (128, 128, 512)
    # smaller stationary/contraction tiles, or moving tiles of 128 or less, are strictly slower: the structures
    # whose bound is not above the optimum are scored whole, the others are out by their bound
    space = t.space(p)
    ch = {q.name: np.asarray(q.choices) for q in space.params}
    bound = t.structure_bounds(p, ("stationary", "tile_stat", "tile_mov", "tile_k"))
    slower = (ch["tile_stat"][None, :, None, None] < 128) | (ch["tile_k"][None, None, None, :] < 128)
    slower = slower | (ch["tile_mov"][None, None, :, None] <= 128)
    close = np.argwhere(np.broadcast_to(slower, bound.shape) & (bound <= best))
    assert len(close) < 200
    inner = space.params[4:]
    every = np.indices([len(q.choices) for q in inner]).reshape(len(inner), -1)
    for fixed in close:
        codes = {q.name: np.full(every.shape[1], int(c)) for q, c in zip(space.params[:4], fixed, strict=True)}
        codes.update({q.name: every[i] for i, q in enumerate(inner)})
        score = t.score_codes(p, codes)
        assert np.asarray(score.objectives["latency"])[np.asarray(score.feasible)].min() > best
    m = t.mapping(p, point)
    r = t.cost(p, m)
    naive = r.breakdown["compute"] / 512 * t.hardware.cores_per_chip * (128 * 128 + 128 * 512) * 2  # every tile loaded
    assert r.bytes["hbm"] < naive / 2  # SBUF blocks are reused across loops
    assert r.utilization > 0.95


@pytest.mark.parametrize("weight", [0, 1])
@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_vector_times_matrix_puts_the_vector_on_moving(preset: str, weight: int) -> None:
    # hardware-facts.md §2.1 "Put the short operand on moving" (nki_perf_guide): MM every ~64 cycles vs ~128.
    # A vector-matrix product is HBM-bound on the real parts, so HBM is overridden out of the way here.
    p = einsum("k,kn->n", {"k": 1024, "n": 1024}, dtype="bf16", weight=weight)
    fast = get_target(preset, {"hbm_bytes_per_s": 1e16, "dma_engine_bytes_per_s": 1e16})
    assert isinstance(fast, TrainiumTarget)
    fast.tiles = LADDER
    real = target(preset)
    best: dict[str, dict[str, float]] = {}
    space = real.space(p)
    assert fast.space(p) == space  # only the bandwidths differ: the same points, built once
    cores = max(q.choices for q in space.params if q.name == "cores")
    cols = sub_columns(space, {"cores": (max(cores),), "order": ("smk", "msk", "ksm")})
    vector_moves = [st for st in ("weight", "other") if p.inputs[roles_of(p, st).mov_input].name == "A"]
    moving_is_vector = np.isin(cols["stationary"], vector_moves)
    for name, t in (("fast", fast), ("real", real)):
        lat = np.asarray(t.score_batch(p, cols).objectives["latency"])
        best[name] = {"vector moving": lat[moving_is_vector].min(), "vector stationary": lat[~moving_is_vector].min()}
    assert best["fast"]["vector stationary"] > 1.5 * best["fast"]["vector moving"]
    assert best["real"]["vector moving"] <= best["real"]["vector stationary"]


def test_warm_start_is_128_128_512_and_feasible() -> None:
    p = einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 2048}, dtype="bf16", weight=1)
    t = target("trn2")
    first = t.warm_starts(p)[0]
    assert (first["tile_stat"], first["tile_k"], first["tile_mov"]) == (128, 128, 512)
    assert t.check(p, t.mapping(p, first)) == []


def test_render_lists_every_loop_and_the_tile_shapes() -> None:
    p = einsum("mk,kn->mn", {"m": 1024, "k": 256, "n": 256}, dtype="bf16", weight=1)
    t = target("trn1")
    m = t.mapping(p, {**ONE, "cores": 2, "block_stat": 2})
    text = t.render(p, m)
    assert sum(len(lvl.loops) for lvl in m.levels) + 5 == len(text.splitlines())
    assert "chip       m              2  spatial over NeuronCores" in text
    assert "stationary [128 partition (k), 128 free (n)] bf16, moving [128, 512 free (m)] bf16" in text


def test_cost_is_never_below_the_roofline() -> None:
    p = einsum("vmk,vkn->vmn", {"v": 2, "m": 300, "k": 200, "n": 100}, dtype="bf16", weight=1)
    for preset in ("trn1", "trn2"):
        t = target(preset)
        cols = sub_columns(t.space(p), {"acc": ("psum",)})
        s = t.score_batch(p, cols)
        lat = np.asarray(s.objectives["latency"])[np.asarray(s.feasible)]
        assert lat.size and lat.min() * t.hardware.te_clock_hz >= t.lower_bound(p).cycles * (1 - 1e-12)
