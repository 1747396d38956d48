"""Issue #15 through the service: POST /v1/mappings/evaluate returns the energy and the breakdowns,
a dotted energy override changes the price, and a bad one is a 422 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from costmodels.registry import get_target
from workload.spec import problem_from_dict

GEMM = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 512, "n": 256}, "weight": 1}


def _point(target: str) -> dict[str, Any]:
    t, p = get_target(target), problem_from_dict(GEMM)
    return next(dict(w) for w in t.warm_starts(p) if not t.check(p, t.mapping(p, w)))


@pytest.mark.parametrize("target", ["rngd", "trn2", "ascend-910b", "wormhole-n150"])
def test_evaluate_returns_energy_and_breakdowns(client: TestClient, target: str) -> None:
    point = _point(target)
    r = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": target, "point": point})
    assert r.status_code == 200, r.text
    cost = r.json()["cost"]
    t, p = get_target(target), problem_from_dict(GEMM)
    want = t.cost(p, t.mapping(p, point))
    assert cost["energy_pj"] == want.energy_pj and r.json()["objectives"]["energy"] == want.energy_pj
    assert cost["energy_breakdown"] == want.energy_breakdown and cost["stall_stack"] == want.stall_stack
    assert cost["operand_bytes"] == want.operand_bytes and cost["operand_energy"] == want.operand_energy


def test_a_dotted_energy_override_changes_the_price_and_a_bad_one_is_422(client: TestClient) -> None:
    point = _point("trn2")
    base = {"problem": GEMM, "target": "trn2", "point": point}
    plain = client.post("/v1/mappings/evaluate", json=base).json()["cost"]
    dear = client.post("/v1/mappings/evaluate", json={**base, "overrides": {"energy.byte_pj.hbm": 96}}).json()["cost"]
    assert dear["energy_breakdown"]["hbm"] == pytest.approx(2 * plain["energy_breakdown"]["hbm"])
    assert dear["energy_pj"] > plain["energy_pj"] and dear["cycles"] == plain["cycles"]
    r = client.post("/v1/mappings/evaluate", json={**base, "overrides": {"energy.byte_pj.hbm": -1}})
    assert r.status_code == 422 and r.json()["token"].startswith("energy.byte_pj.hbm") and "Traceback" not in r.text
    r = client.post("/v1/mappings/evaluate", json={**base, "overrides": {"energy.nothing.hbm": 1}})
    assert r.status_code == 422 and "no section" in r.json()["detail"]
