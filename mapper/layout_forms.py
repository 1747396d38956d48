"""Which form each strided conv takes in a network plan: folded or as given, as the search chooses it.

`mapper.transforms` answers a strided conv on Tenstorrent with the cheaper of the conv as given
and the folded conv plus the fold op, each priced alone (input read from DRAM, output written to
DRAM). The plan takes the same decision per strided conv (`choose_forms`), from the same prices:
the conv as given is the fastest point of its own table's ``(input DRAM, output DRAM)`` column
(`mapper.layout_tables`, enumerated whole anyway), the folded conv the fastest of its table's, plus
`mapper.transforms.fold_op_seconds` on the DRAM path; the folded form is taken when strictly
cheaper (ties keep the conv as given, as the search does). The plan then runs the chosen form
through the chain (`mapper.layout_chain`: a folded conv reads its input from DRAM, the fold op in
its step's price).

Two differences from the search, both stated: the tables are built with the step's live L1 bytes
(the residual tensors kept alive, `mapper.layout_chain`), which the search alone does not have, so
a conv inside a block may choose with less L1; and the plan compares each form's fastest point,
where the search compares its answers after the tie rule (`mapper.ties`: up to 0.5% above the
fastest). For a conv with no live bytes and no tie the decision is the search's.

The folded table is built only when the folded form can win: when the folded conv's admissible
bound plus the fold op (`mapper.transforms.form_bound_seconds`) is not below the conv's optimum as
given, no folded point can be cheaper, so the decision is "as given" without enumerating it (proof:
`mapper.transforms`, "Bounding the second form").
"""

from __future__ import annotations

from typing import Any, cast

from costmodels.protocol import Target
from costmodels.tenstorrent.hardware import TensixHardware
from mapper.cache import TargetFactory
from mapper.layout_chain import FoldedConv, Forms, Step
from mapper.layout_tables import LayerTable, layer_table, placed_target
from mapper.settings import SearchSettings
from mapper.transforms import fold_candidate, fold_op_seconds, form_bound_seconds, second_form_loses
from mapper.watch import Watch
from workload.conv_fold import ConvFold, folded_problem
from workload.problem import Problem

#: the search's settings whose fold rule the plan follows (latency alone: `mapper.transforms.FOLD_OBJECTIVES`)
LATENCY = SearchSettings()


def folded_conv(problem: Problem, fold: ConvFold, hardware: TensixHardware) -> FoldedConv:
    """The folded form of `problem`, its fold op priced on the DRAM path (input in DRAM)."""
    dram = hardware.model_copy(update={"input_in_l1": False})
    return FoldedConv(problem, fold, folded_problem(problem, fold), fold_op_seconds(fold, problem, dram))


def choose_forms(
    problems: list[Problem],
    steps: list[Step],
    tables: list[LayerTable | None],
    preset: str,
    overrides: dict[str, Any],
    factory: TargetFactory,
    cores: int,
    watch: Watch | None = None,
) -> tuple[Forms, dict[int, LayerTable]]:
    """Each strided conv's form (by index in `problems`) and the folded convs' tables (by step index).

    `steps` and `tables` are the chain as given (`build_chain` without forms) and its conv tables.
    """
    at = {id(p): k for k, p in enumerate(problems)}
    cache: dict[str, Target] = {}
    forms: Forms = {}
    folded_tables: dict[int, LayerTable] = {}
    for i, s in enumerate(steps):
        tb = tables[i]
        if not isinstance(s.item, Problem) or tb is None or id(s.item) not in at:
            continue
        live = -(-s.live_bytes // cores)
        alone = placed_target(factory, preset, overrides, cache, input_in_l1=False, output_in_l1=False,
                              l1_live_bytes=live)  # fmt: skip
        fold = fold_candidate(s.item, alone, LATENCY)
        if fold is None:
            continue
        k = at[id(s.item)]
        forms[k] = None
        form = folded_conv(s.item, fold, cast(TensixHardware, alone.hardware))
        original = float(tb.best[(False, False)].min())
        if alone.supports(form.problem):
            continue  # the target cannot run the folded conv: as given
        if second_form_loses(form_bound_seconds(form.problem, alone) + form.op_seconds, original):
            continue  # bounded out: no folded point can be cheaper
        combos = ((False, False), (False, True)) if s.out_l1 else ((False, False),)
        ftb = layer_table(form.problem, preset, overrides, live, combos, factory, cache, watch)
        if float(ftb.best[(False, False)].min()) + form.op_seconds < original:
            forms[k] = form
            folded_tables[i] = ftb
    return forms, folded_tables
