"""How registry changes are noted on a run's document (``registry.record_change``): the
logic alone, against an in-memory stand-in for the metadata store."""

from __future__ import annotations

from typing import Any

from mlpilot.tracking import registry
from mlpilot.tracking.metadata import StoreUnavailable


class FakeStore:
    def __init__(self, docs: dict[str, dict[str, Any]], down: bool = False) -> None:
        self.docs = docs
        self.down = down
        self.updates: list[tuple[str, dict[str, Any]]] = []

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        if self.down:
            raise StoreUnavailable("down")
        return self.docs.get(run_id)

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        self.updates.append((run_id, fields))
        self.docs[run_id].update(fields)


def _registered(version: str) -> dict[str, Any]:
    return {"action": "registered", "name": "m", "version": version, "alias": None}


def test_a_registration_sets_the_version_and_appends_the_change() -> None:
    store = FakeStore({"r1": {"model": {"uri": "models:/m-1", "sha256": {"a": "b"}}}})
    assert registry.record_change(store, "r1", _registered("1"), "cli")
    move = {"action": "alias moved", "name": "m", "version": "1", "alias": "champion"}
    assert registry.record_change(store, "r1", {**move, "previous": "3"}, "dashboard")
    model = store.docs["r1"]["model"]
    assert model["uri"] == "models:/m-1" and model["sha256"] == {"a": "b"}  # kept
    assert model["registered_name"] == "m" and model["version"] == "1"
    assert [(c["action"], c["by"]) for c in model["registry"]] == [
        ("registered", "cli"),
        ("alias moved", "dashboard"),
    ]
    assert model["registry"][1]["previous"] == "3" and model["registry"][0]["at"] < "9"
    assert len({c["id"] for c in model["registry"]}) == 2


def test_a_null_model_field_is_replaced_whole() -> None:
    store = FakeStore({"r1": {"model": None}})
    assert registry.record_change(store, "r1", _registered("2"), "cli")
    (run_id, fields), *_ = store.updates
    assert run_id == "r1" and set(fields) == {"model"}  # no dotted path into a null
    assert fields["model"]["version"] == "2"


def test_the_history_is_bounded() -> None:
    store = FakeStore({"r1": {"model": {}}})
    for i in range(registry.MAX_RECORDED_CHANGES + 5):
        registry.record_change(store, "r1", _registered(str(i)), "cli")
    history = store.docs["r1"]["model"]["registry"]
    assert len(history) == registry.MAX_RECORDED_CHANGES and history[-1]["version"] == str(
        registry.MAX_RECORDED_CHANGES + 4
    )


def test_no_document_no_run_or_a_store_down_records_nothing() -> None:
    assert not registry.record_change(FakeStore({}), "r1", _registered("1"), "cli")
    assert not registry.record_change(FakeStore({"r1": {}}), None, _registered("1"), "cli")
    assert not registry.record_change(None, "r1", _registered("1"), "cli")
    down = FakeStore({"r1": {}}, down=True)
    assert not registry.record_change(down, "r1", _registered("1"), "cli") and not down.updates
