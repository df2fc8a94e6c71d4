"""A result cache in any state, through the CLI on the local executor: what the cache reads is
checked (regular file, size, schema, the tool's version, a checksum and the shape of the raw
facts) and healed when it cannot be trusted; a failed write (a full disk) is a warning; a
``--output`` that cannot be written keeps the computed profile on stdout."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SESSION_TMP, CLIResult, run_cli
from tests.inprocess import run_main


@dataclass
class Warm:
    model: Path
    venv: Path
    cache: Path
    entry: Path
    profile: dict
    code: int


def _probe(warm: Warm, *extra: str, cache: Path | None = None, env: dict[str, str] | None = None,
           timeout: float | None = None, fresh: bool = False) -> CLIResult:
    """The probe through ``main()`` in this process (tests/inprocess.py: the CLI's imports are most
    of a run's CPU here), or in a subprocess where the case needs one: a ``timeout`` (a read that
    could hang), an ``env`` (a version shim), or ``fresh``: a first run with nothing memoized,
    where the case asserts everything a run leaves in the cache dir, or the run's own PID."""
    args = ["probe", "--model", str(warm.model), "--venv", str(warm.venv), "--no-tokenizer", "--no-model-code",
            "--json", *extra]
    if timeout is None and env is None and not fresh:
        result = run_main(*args, env={"INTROSPECT_CACHE_DIR": str(cache or warm.cache)})
    else:
        result = run_cli(*args, timeout=timeout or 60, env={"INTROSPECT_CACHE_DIR": str(cache or warm.cache),
                                                             **(env or {})})
    assert "Traceback" not in result.stderr, result.stderr
    return result


def _copied(pristine: Warm, cache: Path) -> Warm:
    """``pristine``'s entry copied, bytes and mode, into ``cache``: the entry names neither its dir
    nor its file (client/cache.py: the key is the target, options and version), so a copy is the
    same sound entry."""
    cache.mkdir(mode=0o700)
    entry = cache / pristine.entry.name
    shutil.copy2(pristine.entry, entry)
    return Warm(pristine.model, pristine.venv, cache, entry, pristine.profile, pristine.code)


@pytest.fixture(scope="module")
def pristine(kimi_model: Path, venv_full: Path, tmp_path_factory: pytest.TempPathFactory) -> Warm:
    """One cold probe for the module: the sound entry (and the cold profile) every test starts from."""
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    state = Warm(kimi_model, venv_full, cache, cache, {}, 0)
    cold = _probe(state)
    assert cold.json()["cache"] == {"hit": False}, cold.stderr
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1, entries
    state.entry, state.profile, state.code = entries[0], cold.json(), cold.code
    assert _probe(state).json()["cache"]["hit"] is True  # the entry is sound as written
    copy = _copied(state, tmp_path_factory.mktemp("copy") / "cache")
    assert _probe(copy).json()["cache"]["hit"] is True  # and so is a copy of it (what each test gets)
    return state


@pytest.fixture()
def warm(pristine: Warm, tmp_path: Path) -> Warm:
    """A cache of this test's own holding one sound entry for the probe of ``kimi_model`` (a hit):
    a copy of the module's, instead of two probes per test to write and check one."""
    return _copied(pristine, tmp_path / "cache")


def _healed(warm: Warm, result: CLIResult, *why: str) -> dict:
    """The run probed live (exit code and profile as the cold run's), said why on a warning
    line, and left a sound entry that the next run is served from."""
    assert result.code == warm.code, result.stderr
    profile = result.json()
    assert profile["cache"] == {"hit": False}
    assert profile["architecture"] == warm.profile["architecture"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: result cache entry")]
    assert warnings and str(warm.entry) in warnings[0], result.stderr
    for needle in why:
        assert needle in warnings[0], (needle, warnings)
    assert stat.S_ISREG(os.lstat(warm.entry).st_mode)
    assert _probe(warm).json()["cache"]["hit"] is True
    return profile


def _entry(warm: Warm) -> dict:
    return json.loads(warm.entry.read_text())


def _rewrite(warm: Warm, entry: dict, *, reseal: bool) -> None:
    """Write ``entry`` back; ``reseal`` recomputes the raw facts' checksum (a forged entry)."""
    if reseal:
        canonical = json.dumps(entry["raw"], sort_keys=True, separators=(",", ":"))
        entry["sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
    warm.entry.write_text(json.dumps(entry))


def test_fifo_entry_does_not_hang(warm: Warm) -> None:
    warm.entry.unlink()
    os.mkfifo(warm.entry)
    _healed(warm, _probe(warm, timeout=30), "is a FIFO, not a regular file", "removed it")


@pytest.mark.parametrize("target", ["/dev/zero", "sound-copy"])
def test_linked_entry_is_never_followed(warm: Warm, target: str, tmp_path: Path) -> None:
    if target == "sound-copy":  # even a link to a sound entry: the cache holds files, never links
        target = str(tmp_path / "elsewhere.json")
        Path(target).write_bytes(warm.entry.read_bytes())
    warm.entry.unlink()
    warm.entry.symlink_to(target)
    _healed(warm, _probe(warm, timeout=30), "is a symbolic link")
    assert os.path.exists(target)  # the link went, never what it pointed to


def test_entry_over_the_size_cap_is_not_read(warm: Warm) -> None:
    with warm.entry.open("r+b") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: costs no disk, and would cost 65 MiB of memory
    _healed(warm, _probe(warm), "over the", "cap of an entry")


@pytest.mark.parametrize("damage", ["files-a-list", "fingerprint-a-string", "a-config-number"])
def test_changed_raw_facts_under_the_right_digest_are_healed(warm: Warm, damage: str) -> None:
    entry = _entry(warm)
    if damage == "files-a-list":
        entry["raw"]["files"] = [1]
    elif damage == "fingerprint-a-string":
        entry["raw"]["fingerprint"] = "x"
    else:  # deep inside a section, where no type check looks: only the checksum sees it
        entry["raw"]["config"] = {**(entry["raw"].get("config") or {}), "num_hidden_layers": 7}
    _rewrite(warm, entry, reseal=False)
    _healed(warm, _probe(warm), "do not match their checksum")


@pytest.mark.parametrize("damage", ["files-a-list", "target-a-string", "fingerprint-a-string", "errors-an-object"])
def test_forged_entry_with_wrong_types_is_healed(warm: Warm, damage: str) -> None:
    """A resealed entry (its checksum recomputed) whose raw facts have the wrong types."""
    entry = _entry(warm)
    section, value = {"files-a-list": ("files", [1]), "target-a-string": ("target", "t"),
                      "fingerprint-a-string": ("fingerprint", "x"),
                      "errors-an-object": ("errors", {"a": 1})}[damage]
    entry["raw"][section] = value
    _rewrite(warm, entry, reseal=True)
    _healed(warm, _probe(warm), "raw facts")


@pytest.mark.parametrize("content", ["", "   \n", "{}", "null", "[]", "empty-raw", "not json {", "\xff\xfe"])
def test_empty_or_unparsable_entry_is_a_miss(warm: Warm, content: str) -> None:
    if content == "empty-raw":  # the raw facts emptied, the entry resealed: no profile of nulls
        entry = _entry(warm)
        entry["raw"] = {}
        _rewrite(warm, entry, reseal=True)
    else:
        warm.entry.write_bytes(content.encode("latin-1"))
    profile = _healed(warm, _probe(warm))
    assert profile["architecture"]["num_layers"] == 61


def test_directory_in_place_of_an_entry_costs_the_cache_only(warm: Warm) -> None:
    warm.entry.unlink()
    warm.entry.mkdir()
    result = _probe(warm)
    assert result.code == warm.code
    assert result.json()["architecture"] == warm.profile["architecture"]
    assert "is a directory" in result.stderr and f"fix: rm -r -- {warm.entry}" in result.stderr, result.stderr


def _bumped(version: str) -> dict[str, str]:
    """The environment of a run whose introspect says it is ``version`` (a sitecustomize sets it)."""
    shim = SESSION_TMP / f"version-{version}"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(f"import introspect\nintrospect.__version__ = {version!r}\n")
    return {"PYTHONPATH": f"{shim}{os.pathsep}{REPO}"}


def test_another_version_misses_and_keeps_its_own_entry(warm: Warm) -> None:
    bumped = _bumped("99.0.0")
    other = _probe(warm, env=bumped)
    assert other.json()["introspect_version"] == "99.0.0"  # the shim took effect
    assert other.json()["cache"] == {"hit": False}, other.stderr
    assert "warning:" not in other.stderr  # a miss, not damage
    assert len(list(warm.cache.glob("*.json"))) == 2
    assert _probe(warm, env=bumped).json()["cache"]["hit"] is True
    assert _probe(warm).json()["cache"]["hit"] is True


def test_entry_of_another_version_under_this_key_is_healed(warm: Warm) -> None:
    _probe(warm, env=_bumped("99.0.0"))
    other = next(path for path in warm.cache.glob("*.json") if path != warm.entry)
    warm.entry.write_bytes(other.read_bytes())  # sound, sealed, but not this version's
    _healed(warm, _probe(warm), "another introspect version")


def test_modes_of_what_the_cache_creates(warm: Warm, tmp_path: Path) -> None:
    open_dir = tmp_path / "shared"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    assert _probe(warm, cache=open_dir, fresh=True).code == warm.code
    (entry,) = open_dir.glob("*.json")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(open_dir.stat().st_mode) == 0o755  # not ours: left as it was
    nested = tmp_path / "fresh" / "a" / "b"
    assert _probe(warm, cache=nested, fresh=True).code == warm.code
    for directory in (tmp_path / "fresh", nested.parent, nested):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    (entry,) = nested.glob("*.json")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_partial_files_of_gone_writers_are_evicted(warm: Warm) -> None:
    dead = warm.cache / f"{warm.entry.name}.tmp-{_dead_pid()}-0badc0de"
    old_format = warm.cache / f"{warm.entry.stem}.tmp-{_dead_pid()}"  # as releases before wrote them
    live = warm.cache / f"other.json.tmp-{os.getpid()}-00000001"  # this test's PID: a write in progress
    stale = warm.cache / f"stale.json.tmp-{os.getpid()}-00000002"  # same PID, but an hour old
    for path in (dead, old_format, live, stale):
        path.write_text("{")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    info = run_cli("cache", "info", "--json", env={"INTROSPECT_CACHE_DIR": str(warm.cache)})
    assert info.json()["partial_files"] == 4 and info.json()["entries"] == 1
    # A write evicts; in a process of its own, as a real run is: ``live`` is this test's PID's.
    assert _probe(warm, "--refresh", fresh=True).code == warm.code
    assert not dead.exists() and not old_format.exists() and not stale.exists()
    assert live.exists()
    cleared = run_cli("cache", "clear", env={"INTROSPECT_CACHE_DIR": str(warm.cache)})
    assert cleared.code == 0 and "removed 1 cached result(s)" in cleared.stdout
    assert not list(warm.cache.iterdir())


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs at ``where`` (root with mount rights only; skipped otherwise)."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_full_disk_cache_write_is_a_warning(warm: Warm, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "full", "8k") as full:  # two pages: the ~18 kB entry cannot fit
        result = _probe(warm, cache=full, fresh=True)
        assert result.code == warm.code
        assert result.json()["architecture"] == warm.profile["architecture"]
        assert f"warning: result cache not written to {full}: No space left on device" in result.stderr
        assert f"fix: df -h {full}" in result.stderr
        assert os.listdir(full) == []  # no partial file left behind


def _kept_on_stdout(warm: Warm, result: CLIResult, option: str, cause: str) -> None:
    assert result.code == 1, result.stderr
    profile = result.json()
    assert profile["schema"] == "introspect.profile/v1"
    assert profile["architecture"] == warm.profile["architecture"]
    assert profile["error"]["code"] == "output-not-written" and profile["error"]["exit_code"] == 1
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"error: {option}: cannot write") and cause in line for line in lines), lines
    assert any(line.startswith("fix: ") for line in lines), lines


def test_output_into_a_full_disk_keeps_the_profile(warm: Warm, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "full", "8k") as full:
        result = _probe(warm, "--output", str(full / "profile.json"), "--save-raw", str(full / "raw.json"))
        _kept_on_stdout(warm, result, "--output", "No space left on device")
        assert "error: --save-raw: cannot write" in result.stderr
        assert f"fix: df -h {full}" in result.stderr
        assert os.listdir(full) == []


def test_output_into_an_unwritable_place_keeps_the_profile(warm: Warm) -> None:
    result = _probe(warm, "--output", "/proc/introspect-profile.json")
    _kept_on_stdout(warm, result, "--output", "/proc/introspect-profile.json")
    assert "fix: ls -ld /proc" in result.stderr


def test_profile_output_failure_keeps_the_profile(warm: Warm, tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    assert _probe(warm, "--save-raw", str(raw)).code == warm.code
    result = run_cli("profile", str(raw), "--json", "--output", "/proc/introspect-profile.json")
    assert "Traceback" not in result.stderr
    _kept_on_stdout(warm, result, "--output", "/proc/introspect-profile.json")
