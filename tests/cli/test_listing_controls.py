"""Listing controls as ``hf cache ls`` has them (--sort, --filter, --limit, --format, -q) and the
modified / accessed times of listed models: the shared code on plain rows, the times read on the
host, and ``introspect models`` end to end on this machine."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from introspect.cli.listing import Controls, Field, age, apply
from introspect.errors import UsageError
from introspect.remote.facts.model.discovery import model_times
from tests.conftest import assert_clean_error, run_cli
from tests.models import NEW_COMMIT, REPO_ID, add_revision

REAL = Path(__file__).resolve().parent.parent / "data" / "realconfigs"
NOW = 1_800_000_000.0
DAY = 86400.0
GB, GIB = 10**9, 2**30
FIELDS = (Field("name", "text", lambda r: [r["name"], r.get("path")]), Field("type", "text", lambda r: r["type"]),
          Field("size", "bytes", lambda r: r["size"]), Field("params", "count", lambda r: r["params"]),
          Field("modified", "time", lambda r: r["modified"]))
ROWS = [
    {"name": "b-qwen", "path": "/m/qwen", "type": "qwen3_moe", "size": 60 * GB, "params": 30.5e9,
     "modified": NOW - 2 * DAY},
    {"name": "a-kimi", "path": "/m/kimi", "type": "kimi_k25", "size": 594 * GB, "params": 1.03e12,
     "modified": NOW - 40 * DAY},
    {"name": "c-tiny", "path": "/m/tiny", "type": "gpt2", "size": None, "params": None, "modified": None},
    {"name": "d-ds", "path": "/m/ds", "type": "deepseek_v3", "size": 100 * GIB, "params": 671e9,
     "modified": "2027-01-14T08:00:00Z"},  # ISO as the JSON carries it: NOW - 1 day + 40 s
]
EXAMPLE = "introspect models --sort size"


def names(sort: str | None = None, *filters: str, reverse: bool = False, limit: int | None = None) -> list[str]:
    controls = Controls(sort=sort, reverse=reverse, filters=filters, limit=limit)
    return [row["name"] for row in apply(ROWS, controls, FIELDS, EXAMPLE, now=NOW)]


def test_sort_orders_as_hf_does_and_missing_values_last() -> None:
    assert names("name") == ["a-kimi", "b-qwen", "c-tiny", "d-ds"]        # text ascending by default
    assert names("size") == ["a-kimi", "d-ds", "b-qwen", "c-tiny"]       # sizes biggest first
    assert names("size:asc") == ["b-qwen", "d-ds", "a-kimi", "c-tiny"]   # hf's explicit order
    assert names("-name") == ["d-ds", "c-tiny", "b-qwen", "a-kimi"]      # -FIELD is descending
    assert names("modified") == ["d-ds", "b-qwen", "a-kimi", "c-tiny"]   # newest first, ISO and epoch alike
    assert names("size", reverse=True) == ["b-qwen", "d-ds", "a-kimi", "c-tiny"]
    assert names(None, reverse=True) == ["d-ds", "c-tiny", "a-kimi", "b-qwen"]  # the given order, reversed
    assert names("params", limit=2) == ["a-kimi", "d-ds"]


def test_filters_hold_together() -> None:
    assert names(None, "type=deepseek_v3") == ["d-ds"]
    assert names(None, "type=QWEN*") == ["b-qwen"]                       # case-insensitive glob
    assert names(None, "name=/m/kimi") == ["a-kimi"]                     # any of the field's values
    assert names(None, "type!=gpt2", "size>100GB") == ["a-kimi", "d-ds"]  # 100 GiB > 100 GB
    assert names(None, "size>100GiB") == ["a-kimi"]
    assert names(None, "size>=100GiB") == ["a-kimi", "d-ds"]
    assert names(None, "params<100B") == ["b-qwen"]                      # no value: never matches
    assert names(None, "modified<7d") == ["b-qwen", "d-ds"]              # the age, as hf compares it
    assert names(None, "modified>1mo") == ["a-kimi"]
    assert names("size", "size>1GB", limit=1) == ["a-kimi"]


@pytest.mark.parametrize("sort,filters,needle", [
    ("colour", (), "no field 'colour'"),
    ("-size:asc", (), "is not FIELD"),
    (None, ("size~1GB",), "is not KEY OP VALUE"),
    (None, ("size>lots",), "is not a size"),
    (None, ("params>many",), "is not a count"),
    (None, ("modified<soon",), "is not an age"),
    (None, ("type>gpt2",), "compared with = or != only"),
])
def test_bad_controls_name_the_flag_and_fix_with_a_command(sort: str | None, filters: tuple[str, ...],
                                                            needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        apply(ROWS, Controls(sort=sort, filters=filters), FIELDS, EXAMPLE, now=NOW)
    assert needle in caught.value.message and caught.value.exit_code == 2
    assert shlex.split(caught.value.hint or "", comments=True)[:2] == ["introspect", "models"]


def test_format_flags_that_contradict_each_other() -> None:
    with pytest.raises(UsageError, match="two formats"):
        Controls.from_kwargs({"output_format": "csv"}, "introspect models", json_flag=True)
    with pytest.raises(UsageError, match="-q prints only ids"):
        Controls.from_kwargs({"output_format": "yaml", "quiet_ids": True}, "introspect models")
    assert Controls.from_kwargs({}, "introspect models", json_flag=True).format == "json"


def test_ages_read_like_hf_cache_ls() -> None:
    assert age(None) == "-"
    assert age(NOW - 5, now=NOW) == "a few seconds ago"
    assert age(NOW - 90, now=NOW) == "2 minutes ago"
    assert age(NOW - 3 * DAY, now=NOW) == "3 days ago"
    assert age(NOW - 7 * DAY, now=NOW) == "1 week ago"
    assert age(NOW - 40 * DAY, now=NOW) == "6 weeks ago"  # hf shows weeks up to 6
    assert age(NOW - 400 * DAY, now=NOW) == "1 year ago"
    assert age("2027-01-15T08:00:00Z", now=NOW) == "a few seconds ago"  # NOW in ISO-8601 UTC, less 40 s


# --------------------------------------------------------------------------- times on the host


def _touch(path: Path, mtime: float, atime: float) -> None:
    os.utime(path, (atime, mtime))


def test_model_times_leave_out_the_files_the_listing_reads(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / "sub").mkdir(parents=True)
    for name, (mtime, atime) in {"config.json": (NOW - 10, NOW), "tokenizer_config.json": (NOW - 20, NOW),
                                 "model.safetensors": (NOW - 5 * DAY, NOW - 2 * DAY)}.items():
        (model / name).write_text("{}")
        _touch(model / name, mtime, atime)
    (model / "sub" / "extra.bin").write_text("x")
    _touch(model / "sub" / "extra.bin", NOW - 9 * DAY, NOW - 3 * DAY)
    assert model_times(str(model)) == {"modified": NOW - 10, "accessed": NOW - 2 * DAY}
    only_config = tmp_path / "only-config"
    only_config.mkdir()
    (only_config / "config.json").write_text("{}")
    assert model_times(str(only_config))["accessed"] is None  # only our own read: no access to report


def test_cached_snapshot_times_are_its_blobs(tmp_path: Path) -> None:
    files = {"config.json": b"{}", "model.safetensors": b"w" * 64, "nested/extra.txt": b"x"}
    snapshot = add_revision(tmp_path / "hub", REPO_ID, NEW_COMMIT, files, refs=("main",))
    blob = (snapshot / "model.safetensors").resolve()
    _touch(blob, NOW - 3 * DAY, NOW - DAY)
    _touch((snapshot / "nested" / "extra.txt").resolve(), NOW - 4 * DAY, NOW - 4 * DAY)
    _touch((snapshot / "config.json").resolve(), NOW - 6 * DAY, NOW)
    os.utime(snapshot / "model.safetensors", (0, 0), follow_symlinks=False)  # the link's own times never count
    assert model_times(str(snapshot)) == {"modified": NOW - 3 * DAY, "accessed": NOW - DAY}


# --------------------------------------------------------------------------- introspect models


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two model dirs with known sizes and times, and a hub cache snapshot."""
    base = tmp_path_factory.mktemp("listing")
    now = time.time()
    for real, name, size, days in (("kimi-k2.5", "kimi", 3000, 40), ("qwen3-30b-a3b", "qwen", 1000, 2)):
        model = base / "models" / name
        model.mkdir(parents=True)
        shutil.copy(REAL / real / "config.json", model / "config.json")
        (model / "model.safetensors").write_bytes(b"\0" * size)
        for path in model.iterdir():
            os.utime(path, (now - days * DAY, now - days * DAY))
    return base


def _models(root: Path, *args: str) -> Any:
    return run_cli("models", "--roots", str(root / "models"), "--hf-cache", str(root / "no-cache"), *args)


def test_models_sorted_filtered_limited_as_csv(root: Path) -> None:
    result = _models(root, "--sort", "size:asc", "--filter", "type=*moe*", "--format", "csv")
    assert result.code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [Path(r["path"]).name for r in rows] == ["qwen"]
    assert rows[0]["model_type"] == "qwen3_moe" and int(rows[0]["size"]) > 1000
    modified = time.mktime(time.strptime(rows[0]["modified"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert abs(modified - (time.time() - 2 * DAY)) < 120  # ISO-8601 UTC of the files' own mtime


def test_models_json_keeps_its_schema_and_adds_times_and_listing(root: Path) -> None:
    result = _models(root, "--json", "--sort", "-modified", "--limit", "1")
    assert result.code == 0, result.stderr
    document = result.json()
    assert document["schema"] == "introspect.models/v1"
    [host] = document["hosts"]
    [model] = host["models"]  # the newest only
    assert Path(model["path"]).name == "qwen" and model["accessed"].endswith("Z")
    assert document["listing"] == {"sort": "-modified", "reverse": False, "filters": [], "limit": 1,
                                   "shown": 1, "total": 2}
    as_yaml = yaml.safe_load(_models(root, "--format", "yaml", "--sort", "-modified", "--limit", "1").stdout)
    assert json.loads(json.dumps(as_yaml)) == document  # the same document in YAML


def test_ids_only_and_ages_in_the_table(root: Path) -> None:
    ids = _models(root, "-q", "--sort", "name")
    assert ids.code == 0, ids.stderr
    assert ids.stdout.splitlines() == [str(root / "models" / "kimi"), str(root / "models" / "qwen")]
    table = _models(root, "--sort", "accessed:asc", "--wide")
    rows = [line for line in table.stdout.splitlines() if str(root) in line]
    assert "kimi" in rows[0] and "6 weeks ago" in rows[0] and "2 days ago" in rows[1], table.stdout


def test_a_bad_filter_stops_before_any_host_is_asked() -> None:
    started = time.monotonic()
    result = run_cli("models", "--host", "127.0.0.9", "--connect-timeout", "30", "--filter", "bogus>1")
    assert_clean_error(result, 2, "no field 'bogus'")
    assert time.monotonic() - started < 20  # no connect was tried (it would wait 30 s)
