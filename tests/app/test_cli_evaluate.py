"""``mapper evaluate FILE``: the body of POST /v1/mappings/evaluate priced here, with the route's answer, exit codes and
one-line errors; ``--validate`` runs the executor on the mapping too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from app.cli import app
from bench.published_configs import tt
from costmodels.registry import get_target
from workload.spec import problem_from_dict

runner = CliRunner()

GEMM = {"expr": "mk,kn->mn", "sizes": {"m": 1024, "k": 1024, "n": 1024}, "dtype": "bf16", "weight": "B"}
#: a point of Tensix's own knobs (act_block_h, out_subblock): tt-metal's GEMM benchmark point at HiFi4
KNOBS = tt("block/8x8", "l1-sharded", 128, 4, "1x4", db=True)


def _file(tmp_path: Path, body: dict[str, Any], name: str = "body.yaml") -> str:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(body) if name.endswith(".yaml") else json.dumps(body))
    return str(f)


def test_a_knob_point_is_priced_as_the_target_prices_it(tmp_path: Path) -> None:
    body = {"problem": GEMM, "target": "wormhole-n150", "point": KNOBS}
    res = runner.invoke(app, ["evaluate", _file(tmp_path, body), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    t, p = get_target("wormhole-n150"), problem_from_dict({"kind": "einsum", **GEMM})
    cost = t.cost(p, t.mapping(p, KNOBS))
    assert out["feasible"] and out["cost"]["cycles"] == cost.cycles
    assert out["objectives"]["latency"] == cost.objective("latency")
    text = runner.invoke(app, ["evaluate", _file(tmp_path, body)])
    assert text.exit_code == 0 and "wormhole-n150 (tenstorrent): feasible" in text.stdout
    assert "block/8x8: 64 cores" in text.stdout  # the report's notes, then the target's dump


def test_an_infeasible_point_exits_3_with_the_reasons(tmp_path: Path) -> None:
    body = {"problem": GEMM, "target": "wormhole-n150", "point": {**KNOBS, "act_block_h": 100}}
    res = runner.invoke(app, ["evaluate", _file(tmp_path, body, "body.json")])
    assert res.exit_code == 3
    assert "not feasible" in res.stdout and "act-block-h: act_block_h=100" in res.stdout


def test_a_request_the_route_refuses_is_one_error_line(tmp_path: Path) -> None:
    typo = {"problem": GEMM, "target": "wormhole-n150", "point": {**KNOBS, "act_blok_h": 128}}
    res = runner.invoke(app, ["evaluate", _file(tmp_path, typo)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "'act_blok_h'" in res.output and "knobs of its mappings" in res.output
    assert (
        runner.invoke(app, ["evaluate", _file(tmp_path, {"problem": GEMM, "target": "nope", "point": {}})]).exit_code
        == 2
    )
    (tmp_path / "bad.json").write_text("{")
    bad = runner.invoke(app, ["evaluate", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "POST /v1/mappings/evaluate" in bad.output


def test_validate_runs_the_executor_on_the_mapping(tmp_path: Path) -> None:
    small = {"expr": "mk,kn->mn", "sizes": {"m": 64, "k": 96, "n": 64}, "dtype": "bf16", "weight": "B"}
    t, p = get_target("trn2"), problem_from_dict({"kind": "einsum", **small})
    point = next(dict(w) for w in t.warm_starts(p) if not t.check(p, t.mapping(p, w)))  # a point of its space
    body = {"problem": small, "target": "trn2", "point": point}
    res = runner.invoke(app, ["evaluate", _file(tmp_path, body), "--validate", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["feasible"] and out["validation"]["status"] == "passed"


def test_the_readmes_example_body_is_feasible(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    after = readme[readme.index("`mapper evaluate` takes a point") :]
    block = after[after.index("```yaml\n") + len("```yaml\n") :]
    body = yaml.safe_load(block[: block.index("```")])
    res = runner.invoke(app, ["evaluate", _file(tmp_path, body), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["feasible"]


def test_bodies_the_route_refuses_are_one_line_exit_2(tmp_path: Path) -> None:
    cases = [
        {"problem": GEMM, "target": "wormhole-n150", "overrides": {"bogus": 1}, "point": KNOBS},
        {"problem": GEMM, "target": "wormhole-n150", "overrides": {"grid_x": -3}, "point": KNOBS},
        {"problem": {**GEMM, "expr": "mk,kn->mz"}, "target": "wormhole-n150", "point": KNOBS},
        {"problem": {"in_channels": 3, "out_channels": 8, "input_height": 4, "input_width": 4, "kernel": 7},
         "target": "wormhole-n150", "point": KNOBS},
    ]  # fmt: skip
    for i, body in enumerate(cases):
        res = runner.invoke(app, ["evaluate", _file(tmp_path, body, f"b{i}.json")])
        assert res.exit_code == 2, (body, res.output)
        assert "Traceback" not in res.output and res.output.count("error:") == 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for command in ("evaluate", "validate"):
        res = runner.invoke(app, [command, str(deep)])
        assert res.exit_code == 2 and "nested too deeply" in res.output
