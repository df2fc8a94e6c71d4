"""Bounded memory of a fleet probe: the runner keeps only what ``store`` returns, the items are
spooled compressed, and the fleet document is written host by host, byte for byte the text of the
whole document dumped at once."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest

from introspect.cli.json_stream import chunks
from introspect.client.documents import dumps
from introspect.client.fleet import run_fleet
from introspect.client.fleet_gc import YOUNG, fleet_collections
from introspect.client.fleet_items import FleetItem
from introspect.client.fleet_spool import ItemSpool
from introspect.redact import remember

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "profiles"


def _item(i: int) -> FleetItem:
    profile = {"architecture": {"model_type": "kimi_k2", "num_layers": 61, "params": {"total": 1.0e12 + i}},
               "findings": [{"severity": "warn", "message": f"host {i}: ünïcode \u2713", "nan": float("nan")}],
               "nested": {"empty": {}, "list": [], "tuple": (1, 2)}}
    return {"host": f"h{i}", "exit_code": i % 3, "profile": profile if i % 4 else None,
            "error": None if i % 4 else {"type": "HostUnreachable", "message": "refused", "hint": "# x"}}


def test_streamed_document_is_the_whole_document_byte_for_byte() -> None:
    secret = remember("s3cr3t-token-value")  # masked in every printed document, streamed or not
    assert secret is not None
    for count in (0, 1, 5):
        items = [_item(i) for i in range(count)]
        if items:
            items[-1]["host"] = f"with {secret}"
        document = {"schema": "introspect.fleet-profiles/v1", "introspect_version": "0", "model": "/m",
                    "hosts": items, "fleet": {"parallel": 4}, "error": {"code": "x", "message": "y"}}
        streamed = "".join(chunks({**document, "hosts": []}, "hosts", iter(items)))
        assert streamed == dumps(document)
        assert secret not in streamed and json.loads(streamed)["hosts"] == json.loads(dumps(items))


def test_spool_gives_back_each_item_as_json_reads_it_and_stores_less() -> None:
    items = [_item(i) for i in range(40)]
    spool = ItemSpool(len(items))
    for i in reversed(range(len(items))):  # hosts finish in any order; the spool keeps input order
        spool.put(i, items[i])
    assert [dumps(item) for item in spool] == [dumps(item) for item in items]
    profile = spool[3]["profile"]
    assert profile is not None and profile["nested"]["tuple"] == [1, 2]  # what the printed JSON held anyway
    # A real profile (a golden Kimi-K2.6 one) per host: what a fleet probe holds, compressed.
    real = json.loads((GOLDEN / "raw-kimi-k2.6-no-remote-code.json").read_text())
    hosts = ItemSpool(20)
    for i in range(20):
        hosts.put(i, {"host": f"h{i}", "exit_code": 0, "profile": real, "error": None})
    assert hosts[7]["profile"] == real
    assert hosts.stored_bytes() < 20 * len(json.dumps(real)) / 4


class _Big:
    """A result the runner must not hold once ``store`` has spooled it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.payload = bytearray(1 << 16)


def test_the_runner_keeps_only_what_store_returns() -> None:
    made: list[weakref.ref[_Big]] = []
    seen: list[int] = []

    def work(n: int) -> _Big:
        big = _Big(n)
        made.append(weakref.ref(big))
        return big

    def store(index: int, result: object) -> object:
        assert isinstance(result, _Big) and result.n == index
        seen.append(index)
        return index  # the summary kept in place of the result

    results = run_fleet(range(30), work, parallel=4, store=store)
    gc.collect()
    assert results == list(range(30)) and sorted(seen) == list(range(30))
    assert len(made) == 30 and all(ref() is None for ref in made)  # no future or list held a result


def test_the_fleet_bar_keeps_the_summary_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from introspect.cli import progress

    out = io.StringIO()
    monkeypatch.setattr(progress, "enabled", lambda: True)  # as on a terminal
    monkeypatch.setattr("introspect.cli.safe_text.safe_console",
                        lambda **_kw: Console(file=out, force_terminal=True, width=160, color_system=None))
    items = [_item(i) for i in range(3)]  # exit codes 0, 1, 2
    with progress.host_rows(3, "probing /m", lambda item: str(item["host"]),
                            ok=lambda item: item["exit_code"] == 0) as on_done:
        for item in items:
            on_done(item)
    shown = out.getvalue()
    assert "1 ok · 2 failed" in shown and "h0" in shown and "h2" in shown


def test_a_fleet_run_freezes_the_start_up_and_collects_young_objects_less_often_then_undoes_both() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    seen: list[tuple[tuple[int, ...], int]] = []

    def work(item: int) -> int:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return item

    assert run_fleet(list(range(4)), work, parallel=2) == [0, 1, 2, 3]
    assert all(threshold[0] >= YOUNG and count > frozen for threshold, count in seen), seen
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_inner_fleet_runs_leave_the_outer_ones_settings_until_the_last_ends() -> None:
    before = gc.get_threshold()
    with fleet_collections():
        with fleet_collections():
            assert gc.get_threshold()[0] >= YOUNG
        assert gc.get_threshold()[0] >= YOUNG, "the inner run ended, the outer one goes on"
    assert gc.get_threshold() == before
