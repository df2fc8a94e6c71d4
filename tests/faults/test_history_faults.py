"""The history database never costs a `health` run: locked, full, damaged, garbage, read-only.

Every case runs the real CLI against two real sshd hosts on loopback and asserts: the
hosts' exit code (0, all healthy), the results printed (text, or a health document under
--json, never an error document), one `warning:` line naming the real cause with a
`fix:` command, and no traceback. The read-only and full file systems are real: a small
tmpfs (root only; skipped where mounting is not allowed). Odd XDG directories last.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from introspect.checks.history import HistoryStore, Snapshot
from introspect.checks.history_db import describe
from introspect.checks.history_guard import GuardedHistory
from introspect.checks.result import CheckResult
from tests.conftest import CLIResult, run_cli
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust

HOSTS = {"hist-a": "127.0.0.61", "hist-b": "127.0.0.62"}
PAGE = 4096  # SQLite's default page size


# ========================================================================= fixtures


@pytest.fixture(scope="module")
def hist_client(tmp_path_factory: pytest.TempPathFactory) -> ClientKeys:
    return ClientKeys(tmp_path_factory.mktemp("hist-client"))


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory, hist_client: ClientKeys, venv_full: Path) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("hist-sshd")
    servers: list[SSHServer] = []
    try:
        for name, address in HOSTS.items():
            servers.append(start_sshd(root / name, hist_client, address=address))
            trust(servers[-1], hist_client)
        hosts = {name: {"address": s.address, "port": s.port,
                        "venvs": [{"path": str(venv_full), "requires": ["tiktoken"]}]}
                 for name, s in zip(HOSTS, servers, strict=True)}
        path = root / "hosts.yaml"
        path.write_text(yaml.safe_dump({"defaults": {"identity": str(hist_client.key),
                                                     "known_hosts": str(hist_client.known_hosts),
                                                     "connect_timeout": 5, "probe_timeout": 60},
                                        "hosts": hosts}, sort_keys=False))
        yield path
    finally:
        for server in servers:
            server.stop()


def health(inventory: Path, db: Path | None, *args: str, env: dict[str, str] | None = None,
           unset: tuple[str, ...] = ()) -> CLIResult:
    db_args = ["--db", str(db)] if db is not None else []
    return run_cli("health", "--hosts", str(inventory), *db_args, "--ssh-config", "/dev/null", *args,
                   env=env, unset=unset, timeout=180)


def populate(db: Path, runs: int = 40) -> None:
    """A real history: enough runs that the file has many pages, with the fixture's hosts."""
    with HistoryStore(db) as store:
        for i in range(runs):
            store.record_run(argv=["health"], started_at=1000.0 + i, finished_at=1001.0 + i,
                             results=[(name, "/v", CheckResult("package:tiktoken", "pass", "installed " * 20))
                                      for name in HOSTS],
                             snapshots=[Snapshot(name, "/v", True, {"tiktoken": "0.9.0"}) for name in HOSTS])


def run_count(db: Path) -> int:
    with HistoryStore(db, read_only=True) as store:
        return len(store.runs(limit=100000))


def assert_kept_run(result: CLIResult, *warning: str) -> dict[str, Any]:
    """Exit 0 from the healthy hosts, a health document with both hosts, the warning and its fix."""
    assert result.code == 0, (result.code, result.stdout[-2000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("error:")], result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    for needle in warning:
        assert any(needle in line for line in warnings), (needle, result.stderr)
    lines = result.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("warning: ") and warning[0] in line)
    assert lines[first + 1].startswith("fix: "), result.stderr
    doc: dict[str, Any] = {}
    if result.stdout.lstrip().startswith("{"):
        doc = result.json()
        assert doc["schema"] == "introspect.health/v1" and doc["exit_code"] == 0, doc
        assert [h["name"] for h in doc["hosts"]] == list(HOSTS)
        assert all(h["reachable"] for h in doc["hosts"])
    else:
        assert all(name in result.stdout for name in HOSTS), result.stdout
    return doc


@pytest.fixture()
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (room for a small history and its WAL): a real ENOSPC and a real
    read-only remount, which root cannot write through as it can through a 0444 mode."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs",
                                            str(mount)], capture_output=True).returncode != 0:
        pytest.skip("needs root and permission to mount a tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(mount: Path) -> None:
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    assert shutil.disk_usage(mount).free < 4096


def hold_lock(db: Path) -> subprocess.Popen[str]:
    """Another process that takes the write lock and keeps it for the whole run."""
    code = ("import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


# ===================================================================== health runs


@pytest.mark.ssh
@pytest.mark.slow
def test_lock_held_for_the_whole_run(inventory: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    populate(db)
    holder = hold_lock(db)
    try:
        result = health(inventory, db, "--json")
    finally:
        holder.kill()
        holder.wait()
    doc = assert_kept_run(result, "history not recorded: another process holds the lock on")
    assert f"fix: fuser -v {db}" in result.stderr and "writable directory" not in result.stderr
    assert doc["run_id"] is None and doc["history"]["recorded"] is False
    assert "lock" in doc["history"]["warnings"][0]["message"]
    assert doc["history"]["warnings"][0]["fix"].startswith("fuser -v ")
    assert run_count(db) == 40  # nothing half-written


@pytest.mark.ssh
def test_full_file_system(inventory: Path, small_tmpfs: Path, tmp_path: Path) -> None:
    db = small_tmpfs / "history.sqlite3"
    populate(db, runs=2)
    fill(small_tmpfs)
    prom = tmp_path / "introspect.prom"
    text = health(inventory, db, "--prom", str(prom))
    assert_kept_run(text, "history not recorded: the file system holding")
    assert "is full" in text.stderr and f"fix: df -h {small_tmpfs}" in text.stderr
    assert "history not recorded" in text.stdout and "stored in" not in text.stdout
    assert 'introspect_health_host_up{host="hist-a"} 1.0' in prom.read_text()  # Prometheus output unaffected
    doc = assert_kept_run(health(inventory, db, "--json"), "history not recorded: the file system holding")
    assert doc["history"]["recorded"] is False and "full" in doc["history"]["warnings"][0]["message"]
    os.unlink(small_tmpfs / "filler")
    assert run_count(db) == 2


@pytest.mark.ssh
def test_full_file_system_before_the_database_exists(inventory: Path, small_tmpfs: Path) -> None:
    fill(small_tmpfs)
    db = small_tmpfs / "new.sqlite3"
    doc = assert_kept_run(health(inventory, db, "--json"), "history not recorded: the file system holding")
    assert doc["history"]["recorded"] is False
    assert not db.exists()  # no empty database left behind


@pytest.mark.ssh
def test_damaged_page_is_moved_aside(inventory: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    populate(db)
    with open(db, "r+b") as fh:  # page 2: the root page of the first table
        fh.seek(PAGE)
        fh.write(b"\xa5" * PAGE)
    damaged = db.read_bytes()
    result = health(inventory, db, "--json")
    doc = assert_kept_run(result, f"the history database {db} was damaged")
    (aside,) = tmp_path.glob("history.sqlite3.damaged-*")
    assert aside.read_bytes() == damaged  # kept as it was, for salvage
    assert f"moved it aside to {aside}" in result.stderr and f"fix: sqlite3 {aside} .recover" in result.stderr
    assert doc["history"]["recorded"] is True and doc["run_id"] == 1
    with HistoryStore(db) as store:
        assert store.quick_check() is None and [r.id for r in store.runs()] == [1]


@pytest.mark.ssh
def test_garbage_file_is_moved_aside(inventory: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    db.write_bytes(b"not a database, just text\n" * 400)
    text = health(inventory, db)
    assert_kept_run(text, f"the history database {db} was damaged (file is not a database)")
    assert "run #1 stored in" in text.stdout
    (aside,) = tmp_path.glob("history.sqlite3.damaged-*")
    assert aside.read_bytes().startswith(b"not a database")
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


@pytest.mark.ssh
def test_read_only_file_system(inventory: Path, small_tmpfs: Path) -> None:
    db = small_tmpfs / "history.sqlite3"
    first = health(inventory, db, "--json")
    assert first.code == 0 and first.json()["history"]["recorded"], first.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)

    listed = run_cli("history", "--db", str(db), "--json")
    assert listed.code == 0, listed.stderr
    assert [r["id"] for r in listed.json()["runs"]] == [1]
    table = run_cli("history", "--db", str(db))
    assert table.code == 0 and "health" in table.stdout, table.stderr

    doc = assert_kept_run(health(inventory, db, "--json"), "history not recorded:", "read-only file system")
    assert doc["history"]["recorded"] is False
    assert doc["history"]["warnings"][0]["fix"].startswith(f"touch {db}")

    pruned = run_cli("history", "prune", "--keep-days", "0", "--db", str(db))
    assert pruned.code == 2 and "read-only file system" in pruned.stderr and "fix: touch" in pruned.stderr


@pytest.mark.ssh
def test_db_in_an_existing_0755_dir_is_private(inventory: Path, tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    db = folder / "history.sqlite3"
    assert health(inventory, db).code == 0
    # A read-only reader leaves the WAL's -wal and -shm behind: they are private too.
    assert run_cli("history", "--db", str(db)).code == 0
    made = sorted(p.name for p in folder.iterdir())
    assert "history.sqlite3" in made and "history.sqlite3-shm" in made, made
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in folder.iterdir()} == {n: "0o600" for n in made}


# ======================================================= history, no hosts needed


@pytest.mark.skipif(shutil.which("chattr") is None or os.geteuid() != 0, reason="needs root and chattr")
def test_history_reads_an_immutable_file(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    populate(db, runs=3)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this file system does not take the immutable attribute")
    try:
        listed = run_cli("history", "--db", str(db), "--json")
        assert listed.code == 0, listed.stderr
        assert len(listed.json()["runs"]) == 3
        pruned = run_cli("history", "prune", "--keep-days", "0", "--db", str(db))
        assert pruned.code == 2 and "cannot be written" in pruned.stderr and "fix: touch" in pruned.stderr
        assert "Traceback" not in pruned.stderr
    finally:
        subprocess.run(["chattr", "-i", str(db)], capture_output=True)


def test_history_of_a_damaged_file_names_it(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    db.write_bytes(b"garbage" * 1000)
    result = run_cli("history", "--db", str(db))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"error: cannot read the history database: {db} is damaged (file is not a database)" in result.stderr
    assert "fix: sqlite3 " in result.stderr and db.read_bytes() == b"garbage" * 1000  # reading changes nothing


def test_a_busy_lock_is_retried_until_it_is_released(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    populate(db, runs=1)
    holder = hold_lock(db)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:  # the other run finishes while this one backs off
            holder.kill()
            holder.wait()

    try:
        with GuardedHistory(db, busy_timeout=0.1, delays=(0.01, 0.01, 0.01, 0.01), sleep=sleep).open() as store:
            run_id = store.record_run(argv=["health"], started_at=1.0, finished_at=2.0, results=[])
    finally:
        holder.kill()
        holder.wait()
    assert waits == [0.01, 0.01] and run_id == 2 and store.notes == []


def test_faults_are_named_by_cause(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    busy = describe(sqlite3.OperationalError("database is locked"), db)
    assert busy.kind == "busy" and busy.fix.startswith(f"fuser -v {db} ")
    assert describe(sqlite3.DatabaseError("database disk image is malformed"), db).kind == "damaged"
    assert describe(sqlite3.DatabaseError("file is not a database"), db).kind == "damaged"
    assert describe(sqlite3.OperationalError("database or disk is full"), db).kind == "full"
    assert describe(sqlite3.OperationalError("attempt to write a readonly database"), db).kind == "read-only"
    assert describe(OSError(28, "No space left on device"), db).kind == "full"
    assert describe(OSError(30, "Read-only file system"), db).kind == "read-only"
    for fault in (busy, describe(OSError(20, "Not a directory"), db)):
        assert "#" in fault.fix and "\n" not in fault.cause


def test_newer_schema_is_not_recorded_over(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    populate(db, runs=1)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    with GuardedHistory(db).open() as store:
        assert store.record_run(argv=[], started_at=1.0, finished_at=2.0, results=[]) is None
    assert "newer than this introspect" in store.notes[0].text
    assert store.notes[0].fix is not None and store.notes[0].fix.startswith("git pull && pip install .")


# ===================================================================== XDG dirs


def test_xdg_config_home_that_is_a_file(tmp_path: Path, kimi_model: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bogus = tmp_path / "config-file"
    bogus.write_text("not a directory\n")
    result = run_cli("probe", "--model", str(kimi_model), "--python", sys.executable, "--no-tokenizer",
                     "--no-model-code", "--json", env={"XDG_CONFIG_HOME": str(bogus), "HOME": str(home)},
                     unset=("INTROSPECT_CONFIG",), timeout=120)
    assert result.code == 0, result.stderr[-3000:]
    assert result.json()["schema"] == "introspect.profile/v1"
    assert (f"warning: $XDG_CONFIG_HOME ({bogus}) cannot hold a directory: {bogus} is a file, not a directory; "
            f"using {home}/.config/introspect instead") in result.stderr
    assert "fix: unset XDG_CONFIG_HOME" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.ssh
def test_xdg_state_home_that_is_a_file(inventory: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bogus = tmp_path / "state-file"
    bogus.write_text("")
    result = health(inventory, None, "--json", env={"XDG_STATE_HOME": str(bogus), "HOME": str(home)})
    assert_kept_run(result, "$XDG_STATE_HOME")
    fallback = home / ".local" / "state" / "introspect" / "history.sqlite3"
    assert result.json()["history"] == {"db": str(fallback), "recorded": True, "run_id": 1, "warnings": []}
    assert stat.S_IMODE(fallback.stat().st_mode) == 0o600
    assert stat.S_IMODE(fallback.parent.stat().st_mode) == 0o700
