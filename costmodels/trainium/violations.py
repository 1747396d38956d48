"""Violation messages of the Trainium target: what is wrong, with the numbers, and how to fix it.

The masks come from costmodels.trainium.cost.evaluate, so `check` reports exactly the points
`score_batch` marks infeasible.
"""

from __future__ import annotations

from costmodels.family import KNOBS, RULE_CODES, ProblemRules
from costmodels.protocol import Violation
from costmodels.trainium.cost import Evaluation, Quantities
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import Roles
from workload.problem import Problem

#: input dtypes nc_matmul takes (nki-nc_matmul.txt)
NC_MATMUL_DTYPES = ("f8e4m3", "f8e5m2", "bf16", "f16", "f32")

#: problem-level reasons (`supports`): a unary problem is told every reason, not only the first
RULES = ProblemRules(
    unary="a unary reduction has no second operand for the tensor engine; it runs on the Vector "
    "Engine, which this model does not price: use a target with a vector model",
    reduce_op="nc_matmul accumulates sums in PSUM; a {op} reduction runs on the Vector "
    "Engine, which this model does not price: use reduce op add",
    dtype="input {name} is {dtype}, but nc_matmul takes float8/bfloat16/float16/tfloat32/"
    "float32 inputs only: cast it to bf16 (exact for 8- and 4-bit integers) or f32",
    unary_only=False,
)


#: every code `supports` and `check` can return
CODES: tuple[str, ...] = (
    *RULE_CODES,
    KNOBS,
    "structure",
    "coverage",
    "stationary-free",
    "moving-free",
    "contraction",
    "psum-bank",
    "psum-capacity",
    "sbuf-capacity",
    "cores",
    "k-sharding",
    "batch-in-instruction",
)


def _kib(x: float) -> str:
    return f"{x / 1024:.1f} KiB"


def violation_messages(
    problem: Problem,
    hw: TrainiumHardware,
    preset: str,
    roles: Roles,
    q: Quantities,
    ev: Evaluation,
    double_row: bool,
) -> list[Violation]:
    """Messages for every violated mask of a one-point evaluation (``unsupported`` is reported by supports)."""
    ts, tm, tk, tb = (int(a[0]) for a in (q.ts, q.tm, q.tk, q.tb))
    bad = {code for code, mask in ev.violated.items() if bool(mask[0])}
    out: list[Violation] = []

    def add(code: str, message: str) -> None:
        if code in bad:
            out.append(Violation(code=code, message=message))

    add(
        "stationary-free",
        f"stationary free size {ts} exceeds the {hw.pe_cols} limit of nc_matmul: "
        f"tile {roles.label('s')} by {hw.pe_cols} or less",
    )
    add(
        "moving-free",
        f"moving free size {tm} exceeds the {hw.moving_free_max} limit of nc_matmul: "
        f"tile {roles.label('m')} by {hw.moving_free_max} or less",
    )
    lim = hw.max_contraction(double_row)
    extra = "" if lim > hw.pe_rows else f" ({2 * hw.pe_rows} needs fp8 inputs and double_row, NeuronCore-v3)"
    add(
        "contraction",
        f"contraction tile {tk} exceeds the {lim} partitions one nc_matmul contracts: tile {roles.label('k')} by "
        f"{lim} or less and accumulate the tiles in PSUM{extra}",
    )
    add(
        "psum-bank",
        f"an nc_matmul output of {tm} fp32 per partition needs {tm * 4} B, one PSUM bank holds {hw.psum_bank_bytes} B: "
        f"tile {roles.label('m')} by {hw.psum_bank_bytes // 4} or less",
    )
    add(
        "psum-capacity",
        f"{int(ev.psum_banks[0])} PSUM banks are needed ({int(ev.live[0])} open accumulators), "
        f"PSUM has {hw.psum_banks}: use acc=sbuf, fewer tiles per block, or the k block loop innermost",
    )
    add(
        "sbuf-capacity",
        f"the SBUF blocks need {_kib(float(ev.sbuf_pp[0]))} per partition, {_kib(hw.sbuf_partition_bytes)} "
        "available: use fewer tiles per block (block_stat, block_mov, block_k)",
    )
    add(
        "cores",
        f"the mapping spreads over {int(q.cores[0])} NeuronCores, {preset} has {hw.cores_per_chip}: "
        f"shard over {hw.cores_per_chip} or fewer",
    )
    add(
        "k-sharding",
        f"splitting the contraction {roles.label('k')} over NeuronCores needs a cross-core reduction this model "
        "does not price: shard a free axis instead",
    )
    add(
        "batch-in-instruction",
        f"{tb} batch points ({roles.label('b')}) inside one nc_matmul: an instruction multiplies one matrix pair, "
        "move the batch axes to the hbm level",
    )
    return out
