"""/v1/tunings answers a strided conv on Tenstorrent with the folded stem when it is cheaper, and says so."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.jobs.worker import Worker
from app.settings import Settings
from mapper.result import TuneResult

PATCHIFY = {
    "kind": "conv2d",
    "batch": 8,
    "in_channels": 4,
    "out_channels": 128,
    "input_height": 64,
    "input_width": 64,
    "kernel": 4,
    "stride": 4,
}


def test_the_result_carries_the_fold_choice(client: TestClient, settings: Settings) -> None:
    body = {
        "problem": PATCHIFY,
        "target": "wormhole-n150",
        "overrides": {"input_in_l1": True, "output_in_l1": True},
        "validate": True,
    }
    job = client.post("/v1/tunings", json=body).json()
    Worker(settings, store=client.app.state.store).run_once()  # type: ignore[attr-defined]
    raw = client.get(f"/v1/tunings/{job['id']}/result").json()
    assert raw["transform"]["name"] == "fold" and raw["transform"]["chosen"] is True
    result = TuneResult.model_validate(raw)
    assert result.transform is not None and result.transform.total_latency == result.values["latency"]
    assert result.validation_passed is True
