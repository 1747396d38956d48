"""The ``mapper`` command in-process (typer's CliRunner): output, exit codes, one-line errors.

Problems are small and real: a 64x64x64 bf16 matmul on trn2 enumerates its whole space in a
fraction of a second. Each test gets a fresh in-memory result cache, so no test sees another's
cached answer.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from optuna.storages import InMemoryStorage
from typer.testing import CliRunner

import app.cli.running as cli_module
import mapper.cache
from app.cli import EXIT_CODES, app, parse_overrides, read_problem_file
from app.cli.inputs import spec_from_flags

runner = CliRunner()
VALIDATE = importlib.import_module("executor.validate")  # the module (the package exports a function of its name)
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=64", "--size", "n=64", "--weight", "1"]
# a conv whose every mapping needs more L1 than a 64 KiB core with 60 KiB reserved has: no feasible mapping
NO_FIT = [
    *("--conv", "batch=1,in=64,out=64,h=8,w=8,k=3,s=1,p=1", "--target", "wormhole-n150"),
    *("--override", "l1_kib=64", "--override", "l1_reserved_kib=60"),
]


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())


def _one_error_line(output: str) -> str:
    lines = [x for x in output.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    return lines[0]


# ---- results and exit code 0 ------------------------------------------------------------------


def test_tune_json_is_the_result() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    # proven over trn2's whole space of every tile count: by enumeration or by best-first's bound
    assert data["target"] == "trn2" and data["proven_optimal"]
    assert data["stop_reason"] in ("enumerated", "lower-bound", "space-exhausted")
    assert data["validation_passed"] is True and data["mapping"]["levels"]


def test_tune_table_shows_facts_and_dump() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--strategy", "tpe", "--trials", "5"])
    assert res.exit_code == 0, res.output
    assert "gap to bound" in res.output and "validation" in res.output and "nc_matmul" in res.output


def test_several_targets_make_a_comparison_one_row_each() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--target", "rngd", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["target"] for r in rows] == ["trn2", "rngd"]
    assert all(r["error"] is None and r["result"]["target"] == r["target"] for r in rows)
    table = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2,rngd"])
    assert table.exit_code == 0 and "latency by" in table.output and "│ rngd" in table.output


def test_file_with_several_problems_is_tuned_layer_by_layer(tmp_path: Path) -> None:
    f = tmp_path / "layers.yaml"
    f.write_text(
        "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 64, n: 64}, weight: 1, label: first}\n"
        "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 128, n: 64}, weight: 1, label: second}\n"
    )
    res = runner.invoke(app, ["tune", "--file", str(f), "--target", "trn2", "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [lay["label"] for lay in data["layers"]] == ["first", "second"] and data["total_value"] > 0


def test_several_objectives_give_a_pareto_front(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 128, "n": 64}, "weight": 1}')
    args = ["tune", "--file", str(f), "--target", "trn2", "--objective", "latency", "--objective", "footprint"]
    args += ["--seconds", "2"]  # footprint has no floor: the budget ends the search
    res = runner.invoke(app, [*args, "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["objectives"] == ["latency", "footprint"] and len(data["pareto"]) >= 1


def test_patience_flag_reaches_the_settings() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--patience", "0", "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["settings"]["patience"] == 0


# ---- exit code 3: no feasible mapping, failed validation ------------------------------------------


def test_no_feasible_mapping_exits_3() -> None:
    res = runner.invoke(app, ["tune", *NO_FIT, "--json"])
    assert res.exit_code == 3, res.output
    assert json.loads(res.stdout)["mapping"] is None
    assert "no feasible mapping" in res.stderr


def test_failed_validation_exits_3_where_it_exited_0(monkeypatch: pytest.MonkeyPatch) -> None:
    ok = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["validation_passed"] is True
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())  # search again, not the cached answer
    real = VALIDATE.validate

    def failing(*args: object, **kwargs: object) -> Any:
        report = real(*args, **kwargs)  # type: ignore[arg-type]
        return report.model_copy(update={"passed": False, "status": "failed", "failing_elements": 1})

    monkeypatch.setattr(VALIDATE, "validate", failing)
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--json"])
    assert res.exit_code == 3, res.output
    assert json.loads(res.stdout)["validation_passed"] is False and "validation failed" in res.stderr


def test_a_comparison_with_one_infeasible_target_exits_3() -> None:
    args = ["tune", "--conv", "batch=1,in=64,out=64,h=8,w=8,k=3,s=1,p=1", "--target", "wormhole-n150,blackhole-p150"]
    res = runner.invoke(app, [*args, "--override", "l1_kib=64,l1_reserved_kib=60", "--json", "--no-validate"])
    assert res.exit_code == 3, res.output
    assert [r["result"]["mapping"] for r in json.loads(res.stdout)["rows"]] == [None, None]


# ---- exit code 2: one-line errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "trn2", "--objective", "speed"], "unknown objective 'speed'"),
        (["--target", "trn2", "--strategy", "magic"], "strategy"),
        (["--target", "trn2", "--override", "sbuf_partitions"], "not name=value"),
        (["--target", "trn2", "--override", "no_such_field=1"], "no_such_field"),
        (["--target", "no-such-target"], "unknown target"),
        (["--target", "trn2", "--target", "trn2"], "twice"),
        (["--target", "trn2", "--patience", "-1"], "patience"),
        (["--target", "trn2", "--tolerance", "5"], "tolerance"),
        (["--target", "trn2", "--wait", "3"], "--server"),
        (["--target", "trn2", "--param", "batch=2"], "--param goes with --workload"),
    ],
)
def test_errors_are_one_line_with_code_2(args: list[str], needle: str) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, *args])
    assert res.exit_code == 2, res.output
    assert needle in _one_error_line(res.output)


def test_no_feasible_mapping_within_the_budget_is_not_called_infeasible() -> None:
    """A search whose budget ends before it finds any feasible point says so and how to go on (exit 3 still: no
    mapping); one that searched the whole space says the space has none."""
    tiny_trf = ["--override", "trf_bytes_per_slice=1024", "--override", "trf_half_bytes_per_slice=512"]
    args = ["--einsum", "mk,kn->mn", "--size", "m=7", "--size", "k=1000003", "--size", "n=3", "--target", "rngd"]
    res = runner.invoke(app, ["tune", *args, *tiny_trf, "--strategy", "random", "--trials", "1", "--json"])
    assert res.exit_code == 3, res.output
    out = json.loads(res.stdout)
    assert out["point"] is None and out["stop_reason"] == "trials" and out["certificate"]["unexplored"] > 0
    assert any(n.startswith("no feasible mapping found before the search stopped (trials)") for n in out["notes"])
    assert "found before the search stopped (trials)" in res.stderr and "raise --seconds or --trials" in res.stderr
    res = runner.invoke(app, ["tune", *NO_FIT, "--json"])
    assert res.exit_code == 3 and "before the search stopped" not in res.output
    assert any(
        n.startswith("no feasible mapping in the target's search space") for n in json.loads(res.stdout)["notes"]
    )


def test_problem_errors_and_missing_problem_exit_2() -> None:
    res = runner.invoke(app, ["tune", "--einsum", "mk,kn->", "--size", "m=4", "--target", "trn2"])
    assert res.exit_code == 2 and "at 'k'" in _one_error_line(res.output)
    res = runner.invoke(app, ["tune", "--target", "trn2"])
    assert res.exit_code == 2 and "exactly one of" in _one_error_line(res.output)
    res = runner.invoke(app, ["tune", "--conv", "batch=1,in=8,out=8,h=8,w=8,kern=3", "--target", "trn2"])
    assert res.exit_code == 2 and "unknown key 'kern'" in _one_error_line(res.output)
    assert "in_channels" in _one_error_line(res.output)  # the long names are listed too
    res = runner.invoke(app, ["tune", "--conv", "batch=1,in=8,out=8,h=8,w=8,k=3", "--reduce-op", "max"])
    assert res.exit_code == 2 and "--reduce-op applies to --einsum" in _one_error_line(res.output)


def test_conv_keys_take_the_specs_names_and_hxw_pairs() -> None:
    short = spec_from_flags(None, [], "batch=2,in=8,out=16,h=9,w=7,k=3,s=2,p=1,d=1,g=2", "bf16", None, "add", None)
    long = "batch=2,in_channels=8,out_channels=16,input_height=9,input_width=7,kernel_size=3,stride=2,padding=1,"
    assert spec_from_flags(None, [], long + "dilation=1,groups=2", "bf16", None, "add", None) == short
    pairs = spec_from_flags(None, [], "batch=1,in=4,out=4,h=9,w=7,k=3x1,s=2X1,p=1x0", "bf16", None, "add", None)
    assert pairs["kernel"] == [3, 1] and pairs["stride"] == [2, 1] and pairs["padding"] == [1, 0]
    for bad, says in [
        ("batch=1,in=4,out=4,h=9,w=7,k=3,g=2,groups=2", "groups is given twice (as 'g' and 'groups')"),
        ("batch=1,in=4,out=4,h=9,w=7,k=3x", "give one integer or a pair HxW"),
        ("batch=1,in=4,out=4,h=9,w=7,k=3x1x1", "give one integer or a pair HxW"),
        ("batch=1x2,in=4,out=4,h=9,w=7,k=3", "'1x2' is not an integer"),  # (batch is no pair)
        ("batch=1,in=4,out=4,h=9,w=7,k=3,3", "k='3,3': give one integer or a pair HxW"),
        ("batch=1,in=4,out=4,h=9,w=7,k=[3,3]", "k='[3,3]': give one integer or a pair HxW"),
        ("batch=1,in=4,out=4,h=9,w=7,k=1_0", "k='1_0': give one integer or a pair HxW"),
        ("batch=1,in=4,out=4,h=9,w=7,s=1", "--conv needs kernel (k=3 or k=3x1)"),
        ("batch=1,in=4,out=4,k=3", "--conv needs input_height (h=56), input_width (w=56)"),
        ("batch=1,in=4,out=4,h=9,w=7,k=,s=1", "'k' has no value"),
        ("batch=1,in=4,out=4,h=9,w=7,k=-3", "a kernel of -3 is meaningless"),
        ("batch=1,in=15,out=16,h=9,w=7,k=3,g=5", "groups=5 does not divide out_channels=16 ("),
        ("batch=1;in=4;out=4", "separate the name=value items with commas"),
        ("batch=1,in=4,out=4,h=9,w=7,k=" + "9" * 5000, "k has 5,000 digits"),
        ("batch=1,in=4,out=4,h=9,w=7,k=3,k=" + "9" * 500, "... (500 characters)): give it once"),
    ]:
        res = runner.invoke(app, ["tune", "--conv", bad, "--target", "trn2"])
        assert res.exit_code == 2 and says in _one_error_line(res.output), (bad, res.output)
    res = runner.invoke(app, ["tune", "--conv", "batch=1,in=8,out=8,h=8,w=8,kernel_size=3x1", "--target", "trn2"])
    assert res.exit_code == 0, res.output
    stray = spec_from_flags(None, [], "in=4,out=4,,h=9,w=7,k=3,", "bf16", None, "add", None)  # stray commas
    assert stray == spec_from_flags(None, [], "in=4,out=4,h=9,w=7,k=3", "bf16", None, "add", None)


def test_a_problem_the_target_cannot_run_exits_2_alone_and_3_in_a_comparison() -> None:
    row_product = ["--einsum", "ij->i", "--size", "i=64", "--size", "j=256", "--dtype", "f16", "--reduce-op", "mul"]
    alone = runner.invoke(app, ["tune", *row_product, "--target", "trn2"])
    assert alone.exit_code == 2, alone.output
    assert "cannot" in _one_error_line(alone.output) or "support" in alone.output
    both = runner.invoke(app, ["tune", *row_product, "--out-dtype", "f16", "--target", "ascend-910b,trn2", "--json"])
    assert both.exit_code == 3, both.output
    rows = {r["target"]: r for r in json.loads(both.stdout)["rows"]}
    assert rows["ascend-910b"]["result"]["validation_passed"] is True
    assert rows["trn2"]["result"] is None and rows["trn2"]["error"]


# ---- the --file defects ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfe\x00kind: einsum", "is not UTF-8 text (byte 0xff at offset 0)"),
        (b"kind: einsum\nexpr: \x80\x81", "is not UTF-8 text (byte 0x80"),
        (b"[" * 10_000 + b"]" * 10_000, "more than 64 levels deep"),
        (b"- " * 3_000 + b"1", "more than 64 levels deep"),
        (b"{" + b'"a": {' * 200 + b"}" * 201, "more than 64 levels deep"),
        (b"&a [*a]", "more than 64 levels deep"),  # a list that holds itself
        (b"kind: einsum\nexpr: [unclosed", "is not valid JSON or YAML at line"),
        (b"[]", "empty list"),
        (b"kind: einsum\nexpr: 'mk,kn->mn'\nsizes: {m: 4, k: 4}\n", "at 'n'"),
        (b"just a string", ""),
    ],
)
def test_problem_file_defects_are_one_line_with_code_2(tmp_path: Path, content: bytes, needle: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_bytes(content)
    res = runner.invoke(app, ["tune", "--file", str(f), "--target", "trn2"])
    assert res.exit_code == 2, res.output
    assert needle in _one_error_line(res.output)


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["tune", "--file", str(tmp_path / "nope.yaml"), "--target", "trn2"])
    assert res.exit_code == 2 and "cannot read" in _one_error_line(res.output)


def test_read_problem_file_accepts_utf8_with_a_byte_order_mark(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_bytes(b'\xef\xbb\xbf{"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 4, "k": 4, "n": 4}}')
    assert read_problem_file(f)[0]["expr"] == "mk,kn->mn"


# ---- --override lists ----------------------------------------------------------------------------------


def test_override_of_a_tuple_field_takes_one_value_or_a_comma_list() -> None:
    assert parse_overrides(["fidelities=LoFi"], ["wormhole-n150"]) == {"fidelities": ["LoFi"]}
    assert parse_overrides(["fidelities=LoFi,HiFi4"], ["wormhole-n150"]) == {"fidelities": ["LoFi", "HiFi4"]}
    assert parse_overrides(["fidelities=[LoFi, HiFi2]"], ["wormhole-n150"]) == {"fidelities": ["LoFi", "HiFi2"]}
    both = parse_overrides(["fidelities=LoFi,HiFi2,grid_x=4"], ["wormhole-n150"])
    assert both == {"fidelities": ["LoFi", "HiFi2"], "grid_x": 4}
    assert parse_overrides(["sbuf_partitions=64"], ["trn2"]) == {"sbuf_partitions": 64}


def test_override_fidelities_lofi_reaches_the_search() -> None:
    args = ["tune", *MATMUL, "--target", "wormhole-n150", "--json", "--no-validate"]
    res = runner.invoke(app, [*args, "--override", "fidelities=LoFi"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["overrides"] == {"fidelities": ["LoFi"]} and data["point"]["math_fidelity"] == "LoFi"
    res = runner.invoke(app, [*args, "--override", "fidelities=LoFi,HiFi4"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["overrides"] == {"fidelities": ["LoFi", "HiFi4"]}
    bad = runner.invoke(app, [*args, "--override", "fidelities=LoFi,Turbo"])
    assert bad.exit_code == 2 and "fidelities" in _one_error_line(bad.output)


# ---- lists, help, server-only commands ------------------------------------------------------------------


def test_targets_and_workloads_list() -> None:
    res = runner.invoke(app, ["targets", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {"rngd", "trn2", "wormhole-n150"} <= {r["target"] for r in rows} and all(r["family"] for r in rows)
    res = runner.invoke(app, ["workloads", "--json"])
    assert res.exit_code == 0, res.output
    assert "resnet50" in {r["workload"] for r in json.loads(res.stdout)}
    assert runner.invoke(app, ["workloads"]).exit_code == 0


def test_piped_tables_are_not_cut_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard output that is not a terminal (a pipe, a CI log) gets wide tables: every figure and description whole,
    no ellipsis (rich's default for a non-terminal was 80 columns, which cut them)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    res = runner.invoke(app, ["targets"])
    assert res.exit_code == 0 and "slices_per_cluster=256" in res.stdout and "…" not in res.stdout, res.stdout
    res = runner.invoke(app, ["workloads"])
    wanted = json.loads(runner.invoke(app, ["workloads", "--json"]).stdout)
    flat = " ".join(res.stdout.replace("│", " ").split())
    assert res.exit_code == 0 and all(" ".join(w["description"].split()) in flat for w in wanted), res.stdout
    assert "..." not in flat and not any(w["description"].startswith(w["workload"]) for w in wanted)
    monkeypatch.setenv("COLUMNS", "100")  # (still the user's to set)
    assert max(len(line) for line in runner.invoke(app, ["targets"]).stdout.splitlines()) <= 100


@pytest.mark.parametrize(
    ("flag", "example"), [("--einsum", "mk,kn->mn"), ("--conv", "batch=1,in=64"), ("--workload", "resnet50")]
)
def test_an_empty_problem_flag_is_named(flag: str, example: str) -> None:
    res = runner.invoke(app, ["tune", flag, " ", "--target", "trn2"])
    assert res.exit_code == 2 and f"{flag} is empty: give one, e.g. {flag} {example}" in _one_error_line(res.output)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--size", "m=7"], "--size 'm' is given twice ('64' and '7'): give it once"),  # (MATMUL gives m=64)
        (["--override", "pe_rows=64,pe_rows=32"], "--override 'pe_rows' is given twice"),
        (["--seconds", "nan"], "--seconds nan is not a number of seconds"),
        (["--seconds", "inf"], "--seconds inf is not a number of seconds"),
    ],
)
def test_a_flag_given_twice_or_a_budget_that_is_no_number_is_an_error(args: list[str], says: str) -> None:
    """Last-wins would silently run another problem (or budget) than the one meant."""
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", *args])
    assert res.exit_code == 2 and says in _one_error_line(res.output), res.output


def test_help_documents_the_exit_codes() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    text = " ".join(res.output.replace("│", " ").split())
    assert EXIT_CODES.split(";")[0] in text and "6 regression" in text


@pytest.mark.parametrize("command", [["status", "abc"], ["watch", "abc"], ["cancel", "abc"]])
def test_job_commands_need_a_server(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TM_SERVER", raising=False)
    res = runner.invoke(app, command)
    assert res.exit_code == 2 and "--server" in _one_error_line(res.output)


# ---- exit code 4: a search stopped by Ctrl-C ------------------------------------------------------------


TPE = ["--strategy", "tpe", "--trials", "20"]  # a search that looks for a stop request between trials


@pytest.fixture
def interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if Ctrl-C had been pressed once before the search began (the first press stops, keeping the best)."""

    @contextmanager
    def pressed() -> Iterator[threading.Event]:
        stop = threading.Event()
        stop.set()
        yield stop

    monkeypatch.setattr(cli_module, "_interruptible", pressed)


def test_a_search_stopped_by_ctrl_c_exits_4(interrupted: None) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", *TPE, "--json"])
    assert res.exit_code == 4, res.output
    assert json.loads(res.stdout)["stop_reason"] == "cancelled" and "search cancelled" in res.stderr


def test_a_comparison_stopped_by_ctrl_c_exits_4_naming_the_targets_not_tuned(interrupted: None) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2,rngd", *TPE, "--json"])
    assert res.exit_code == 4, res.output
    first, second = json.loads(res.stdout)["rows"]
    assert first["result"]["stop_reason"] == "cancelled" and second["result"] is None
    assert second["error"] == "cancelled before this target was tuned"


def test_block_float_inputs_tune_on_tenstorrent_and_are_refused_elsewhere_in_one_line() -> None:
    bf8 = [*MATMUL, "--dtype", "bfloat8_b"]
    ok = runner.invoke(app, ["tune", *bf8, "--target", "wormhole-n150", "--override", "fidelities=LoFi", "--json"])
    assert ok.exit_code == 0, ok.output
    result = json.loads(ok.stdout)
    assert result["validation_passed"] is True and result["mapping"]["knobs"]["math_fidelity"] == "LoFi"
    refused = runner.invoke(app, ["tune", *bf8, "--target", "trn2"])
    assert refused.exit_code == 2
    assert "only the Tenstorrent targets take (blackhole-p150, wormhole-n150)" in _one_error_line(refused.output)
    output = runner.invoke(app, ["tune", *bf8, "--out-dtype", "bfloat8_b", "--target", "wormhole-n150"])
    assert output.exit_code == 2 and "inputs only" in _one_error_line(output.output)


def test_the_cli_starts_without_the_service_modules() -> None:
    """`mapper tune` and a refused input do not import FastAPI or the service's schemas (about 0.4 s of every call's
    start-up; `mapper validate` imports them when it runs)."""
    import subprocess
    import sys

    code = "import sys, app.cli; print([m for m in sys.modules if m == 'fastapi' or m.startswith('app.api')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
