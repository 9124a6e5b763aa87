"""The speedups and Benchmarks pages' queries against the real metadata stores (embedded
and a MongoDB-protocol server), on recorded benchmark documents saved as the benchmarks
save them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlpilot.dashboards import queries
from mlpilot.dashboards import speedups_view as view
from mlpilot.platform.config import Settings

pytestmark = pytest.mark.integration

DATA = Path(__file__).parents[1] / "unit" / "data" / "benchmarks"


def recorded() -> list[dict[str, Any]]:
    docs = [*json.loads((DATA / "compare_gpu_ran.json").read_text())]
    for name in ("compare_gpu_unavailable", "stages_gpu_unavailable", "automl", "scale"):
        docs.append(json.loads((DATA / f"{name}.json").read_text()))
    return docs


@pytest.fixture(params=["embedded", "mongodb"])
def benchmark_store(request: pytest.FixtureRequest, home: Path) -> Iterator[str]:
    env = {"MLPILOT_HOME": str(home)}
    if request.param == "mongodb":
        server = request.getfixturevalue("nx_server")
        env.update(MLPILOT_MONGO_URI=server.uri, MLPILOT_MONGO_DB=f"bench{uuid.uuid4().hex[:8]}")
    settings = Settings.from_env(env)
    from mlpilot.tracking.metadata import connect

    store = connect(settings)
    assert store.kind == request.param
    for doc in recorded():
        doc_id = str(doc.pop("_id", None) or uuid.uuid4().hex)
        doc.pop("created_at", None)
        store.save_benchmark(doc_id, doc)
    queries.configure(settings)
    try:
        yield request.param
    finally:
        queries.configure(None)


def test_speedup_documents_are_compare_and_stage_ones(benchmark_store: str) -> None:
    docs = queries.speedup_benchmarks()
    assert len(docs) == 4
    assert {d.get("kind") for d in docs} == {None, "stages"}
    found = view.points(docs)
    assert set(view.series(found)["train"][i].experiment for i in range(2)) == {"sales", "churn"}


def test_benchmarks_of_a_kind(benchmark_store: str) -> None:
    (automl,) = queries.benchmarks_of_kind("automl")
    assert automl["_id"] == "automl-readme-60s" and automl["counts"]["autogluon"]["win"] == 3
    (scale,) = queries.benchmarks_of_kind("scale")
    assert view.generic_table(scale["rows"])[0][:3] == ["tool", "rows", "budget_s"]
    assert queries.benchmarks_of_kind("nothing") == []
