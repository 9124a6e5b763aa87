"""The parent's reading of a running pipeline's events: one no-follow descriptor, capped."""

from __future__ import annotations

import os

from mlpilot.platform.execution import EventTail, completed_stages
from mlpilot.platform.ml import protocol
from mlpilot.platform.ml.protocol import PipelineEvent
from mlpilot.tracking.runfolder import RunFolder

START = PipelineEvent(type="stage_start", at="now", stage="load").to_json() + "\n"
END = PipelineEvent(type="stage_end", at="now", stage="load").to_json() + "\n"


def _tail(tmp_path, seen):
    return EventTail(RunFolder(tmp_path), seen.append)


def test_events_are_read_from_the_descriptor_opened_first(tmp_path):
    seen: list[PipelineEvent] = []
    tail = _tail(tmp_path, seen)
    tail()  # no file yet
    events = tmp_path / protocol.EVENTS_FILE
    events.write_text(START)
    tail()
    assert [e.type for e in seen] == ["stage_start"]
    with events.open("a") as fh:
        fh.write(END + '{"type": "stage_s')  # half a line waits for the rest
    tail()
    assert [e.type for e in seen] == ["stage_start", "stage_end"]
    # swapped for a link afterwards: the parent keeps reading its own descriptor
    (tmp_path / "secret").write_text(START * 3)
    events.unlink()
    os.symlink(tmp_path / "secret", events)
    tail()
    assert len(seen) == 2
    tail.close()


def _sparse(path, size):
    with path.open("wb") as fh:
        fh.truncate(size)


def test_a_link_a_fifo_or_a_huge_file_is_never_read(tmp_path):
    events = tmp_path / protocol.EVENTS_FILE
    (tmp_path / "secret").write_text(START)
    for plant in (
        lambda: os.symlink(tmp_path / "secret", events),
        lambda: os.mkfifo(events),
        lambda: _sparse(events, 3 * 2**30),
    ):
        seen: list[PipelineEvent] = []
        plant()
        tail = _tail(tmp_path, seen)
        tail()
        tail()
        assert seen == [] and tail._fd is None  # refused, and not retried
        assert completed_stages(tmp_path) == []
        events.unlink()
