"""Batches: the tasks that share an interpreter run in one session, each with its own outcome.

Real processes through the local executor (the SSH path is the same code over a channel,
covered by tests/transport/test_executors.py): one spawn for the whole batch, an isolated
task still under its own supervisor (own pid, timeout and temp dir), a task past its timeout
costs only itself, and a session closed midway keeps the replies that had come and leaves
no process behind.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from introspect.client.runner import Channel, run_channels
from introspect.errors import IntrospectError
from introspect.transport.base import BatchItem, ProbeReply
from introspect.transport.batching import BatchStopped
from introspect.transport.local import LocalExecutor

PY = sys.executable


def _counting(executor: LocalExecutor) -> list[list[str]]:
    spawned: list[list[str]] = []
    original = executor._spawn

    def spawn(argv: list[str]):  # type: ignore[no-untyped-def]
        spawned.append(argv)
        return original(argv)

    executor._spawn = spawn  # type: ignore[method-assign]
    return spawned


def _marked_processes(mark: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
        except (OSError, IndexError):
            continue
    return found


def test_tasks_of_one_interpreter_answer_in_one_session() -> None:
    with LocalExecutor() as executor:
        spawned = _counting(executor)
        plain, isolated = executor.run_batch(PY, [BatchItem("echo", {"n": 1}, 30),
                                                  BatchItem("echo", {"n": 2}, 30, isolate=True)])
    assert len(spawned) == 1
    assert isinstance(plain, ProbeReply) and isinstance(isolated, ProbeReply)
    assert plain.facts["request"] == {"n": 1} and isolated.facts["request"] == {"n": 2}
    assert plain.supervisor is None
    assert isolated.supervisor is not None and isolated.supervisor["temp_dir_removed"] is True
    # The isolated task ran in a process group of its own, not in the batch's process.
    assert isolated.facts["pgid"] != plain.facts["pgid"] and isolated.facts["pid"] != plain.facts["pid"]
    assert plain.python is not None and plain.python["executable"]


def test_run_channels_batches_by_interpreter_and_keeps_each_channels_key(tmp_path: Path) -> None:
    other = tmp_path / "python"
    other.symlink_to(PY)  # another interpreter path: a session of its own
    channels = [Channel("a", PY, "echo", {"n": "a"}), Channel("b", str(other), "echo", {"n": "b"}),
                Channel("c", PY, "echo", {"n": "c"}, isolate=True)]
    with LocalExecutor() as executor:
        spawned = _counting(executor)
        results = run_channels(executor, channels)
    assert sorted(argv[0] for argv in spawned) == sorted([PY, str(other)])
    assert list(results) == ["a", "b", "c"]
    assert [results[k].facts["request"]["n"] for k in "abc"] == ["a", "b", "c"]


def test_an_isolated_task_past_its_timeout_costs_only_itself() -> None:
    with LocalExecutor() as executor:
        quick, stuck = executor.run_batch(PY, [BatchItem("echo", {"n": 1}, 30),
                                               BatchItem("echo", {"sleep": 120}, 2, isolate=True)])
    assert isinstance(quick, ProbeReply) and quick.facts["request"] == {"n": 1}
    assert isinstance(stuck, ProbeReply) and stuck.facts is None
    assert [(e["probe"], e["type"]) for e in stuck.errors] == [("echo", "timeout")]


def test_a_session_closed_midway_keeps_the_replies_that_came_and_leaves_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mark = f"INTROSPECT_BATCH_TEST_{uuid.uuid4().hex}"
    monkeypatch.setenv("INTROSPECT_BATCH_MARK", mark)
    with LocalExecutor() as executor:
        # Closed the way the whole-run deadline closes it, once the quick task has answered.
        timer = threading.Timer(3.0, executor.close)
        timer.start()
        try:
            quick, slow = executor.run_batch(PY, [BatchItem("echo", {"n": 1}, 60),
                                                  BatchItem("echo", {"sleep": 120}, 60, isolate=True)])
        finally:
            timer.cancel()
    assert isinstance(quick, ProbeReply) and quick.facts["request"] == {"n": 1}
    assert isinstance(slow, IntrospectError)
    deadline = time.monotonic() + 10
    while _marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked_processes(mark) == []


def test_a_check_whose_digest_matches_stops_the_batch(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with LocalExecutor() as executor:
        [stamp] = executor.run_batch(PY, [BatchItem("fingerprint", {"model_path": str(tmp_path)}, 30)])
        assert isinstance(stamp, ProbeReply)
        digest = stamp.facts["digest"]
        check, rest = executor.run_batch(PY, [BatchItem("fingerprint", {"model_path": str(tmp_path)}, 30,
                                                        stop_if_digest=digest),
                                              BatchItem("echo", {"n": 1}, 30)])
        assert isinstance(check, ProbeReply) and check.facts["digest"] == digest
        assert isinstance(rest, BatchStopped)
        check, rest = executor.run_batch(PY, [BatchItem("fingerprint", {"model_path": str(tmp_path)}, 30,
                                                        stop_if_digest="something else"),
                                              BatchItem("echo", {"n": 1}, 30)])
        assert isinstance(rest, ProbeReply) and rest.facts["request"] == {"n": 1}


def test_a_cached_probe_needs_one_session_hit_or_miss(tmp_path: Path) -> None:
    from introspect.client.cache import ProbeCache
    from introspect.client.model import ProbeOptions, gather_cached

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2}', encoding="utf-8")
    cache = ProbeCache(tmp_path / "cache")
    options = ProbeOptions(model_path=str(model), python=PY, load_tokenizer=False, load_model_code=False)
    target = {"scheme": "local", "host": "local", "python": PY, "model_path": str(model)}
    hits = []
    for change in (None, None, "config.json"):
        if change:
            (model / change).write_text('{"model_type": "llama", "num_hidden_layers": 3}', encoding="utf-8")
        with LocalExecutor() as executor:
            spawned = _counting(executor)
            raw = gather_cached(executor, options, target, cache, refresh=False)
        assert len(spawned) == 1
        hits.append(raw["cache"]["hit"])
    assert hits == [False, True, False]
    assert raw["files"]["config"]["num_hidden_layers"] == 3


def test_a_long_error_message_arrives_cut_once_with_its_true_size() -> None:
    """The cap is applied once per frame, on the single-task path and in a batch alike."""
    task = "t" * 10000  # an unknown task: its error message names it in full
    size = len(f"no such remote task: {task!r}")
    with LocalExecutor() as executor:
        single = executor.run_python(PY, task, {}, timeout=30)
        batched, _ = executor.run_batch(PY, [BatchItem(task, {}, 30), BatchItem("echo", {}, 30)])
    assert isinstance(batched, ProbeReply)
    for reply in (single, batched):
        [error] = reply.errors
        assert error["message_size"] == size and error["truncated"] is True
