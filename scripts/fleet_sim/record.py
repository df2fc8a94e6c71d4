"""The recorder: run the real product once against one passthrough host and keep what it answered.

A one-host simulator in passthrough mode (every exec really runs here under ``sh -c``: the shipped
remote runner on a real venv and the Kimi-like model fixture) is driven by the real ``introspect``
CLI, exactly the commands the fleet bench runs, and by the peers' version one-liner. Every exchange
(stdin envelope -> stdout, stderr, exit status) is stored in a recordings file that the simulator
then replays to thousands of hosts. The fixture paths are kept in the file's ``meta``: inventories
for the replayed fleet name the same venv and model, so the replies match the requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .files import write_inventory
from .recordings import FILES_ONLY, PEER, PEER_JOB, Recordings, product_key
from .server import Simulator
from .spec import FleetSpec

REPO = Path(__file__).resolve().parents[2]
# What `introspect health` checks in each venv (as scripts/bench does).
REQUIRES = ["transformers", "tiktoken", "tokenizers"]
RECORD_ADDRESS = "127.1.255.1"  # the recorder's one host, away from the fleets' 127.1.0.1 upwards


def health_argv(inventory: Path, db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "introspect.cli.main", "health", "--hosts", str(inventory), "--all-hosts",
            "--ssh-config", "/dev/null", "--db", str(db), "--json", *extra]


def probe_argv(inventory: Path, model: str, venv: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "introspect.cli.main", "probe", "--hosts", str(inventory), "--all-hosts",
            "--ssh-config", "/dev/null", "--model", model, "--venv", venv, *FILES_ONLY, "--json", *extra]


def cli_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "PYTHONSTARTUP")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               INTROSPECT_CACHE_DIR=str(tmp / "cache"), INTROSPECT_CONFIG=str(tmp / "no-config.yaml"))
    return env


class LoopThread:
    """An asyncio loop in a thread, to serve the simulator while this thread runs the CLI."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fleet-sim", daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _fixtures(tmp: Path, light: bool) -> tuple[str, str]:
    """A venv of this interpreter's packages and a model dir: the Kimi-like fixture (tokenizer files,
    remote code), or with ``light`` only its real config.json (seconds less for the tests)."""
    sys.path.insert(0, str(REPO))
    from tests.fixtures.kimi_model import REALCONFIGS, build_kimi_model
    from tests.fixtures.venvs import make_venv

    venv = make_venv(tmp / "venv")
    model = tmp / "models" / "Kimi-K2.6"
    if light:
        model.mkdir(parents=True)
        shutil.copyfile(REALCONFIGS / "kimi-k2.5" / "config.json", model / "config.json")
    else:
        build_kimi_model(model)
    return str(venv), str(model)


def _run(argv: Sequence[str], env: dict[str, str], cwd: Path, ok: Callable[[subprocess.CompletedProcess[bytes]], bool],
         what: str) -> None:
    done = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, timeout=300, check=False)
    if not ok(done):
        raise RuntimeError(f"recording {what} failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-1500:]}")


def record(out: Path, log: Callable[[str], None] = lambda _m: None, light: bool = False) -> Recordings:
    """Record every exchange of the fleet bench's commands into ``out`` (and return them)."""
    with tempfile.TemporaryDirectory(prefix="fleet-sim-record-") as name:
        tmp = Path(name)
        venv, model = _fixtures(tmp, light)
        recorded = Recordings(meta={"product_key": product_key(), "venv": venv, "model": model,
                                    "python": f"{venv}/bin/python", "requires": REQUIRES,
                                    "probe_flags": list(FILES_ONLY)})
        sim = Simulator(FleetSpec(1, first_address=RECORD_ADDRESS, vary=False), Recordings(), tmp / "sim",
                        passthrough=recorded)
        loop = LoopThread()
        try:
            endpoints = loop.call(sim.start())
            known = tmp / "known_hosts"
            known.write_text("".join(f"[{e.address}]:{e.port} {e.host_key}\n" for e in endpoints))
            inventory = tmp / "hosts.yaml"
            write_inventory(inventory, endpoints, key=sim.key_path, known_hosts=known, venv=venv, requires=REQUIRES)
            env, cwd = cli_env(tmp), tmp
            _run(health_argv(inventory, tmp / "h.db"), env, cwd, lambda d: d.returncode in (0, 1), "health")
            log("  recorded `introspect health --json`")
            _run(probe_argv(inventory, model, venv), env, cwd,
                 lambda d: d.returncode in (0, 1) and b'"status": "ok"' in d.stdout, "probe")
            log(f"  recorded `introspect probe {' '.join(FILES_ONLY)}`")
            _run(["ssh", "-i", str(sim.key_path), "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes",
                  "-o", "StrictHostKeyChecking=yes", "-F", "/dev/null", "-p", str(endpoints[0].port),
                  endpoints[0].address, f"{venv}/bin/python -c '{PEER_JOB}'"], env, cwd,
                 lambda d: d.returncode == 0 and PEER in recorded.exchanges, "the peers' version job")
            log("  recorded the peers' version job (OpenSSH client)")
        finally:
            loop.call(sim.close())
            loop.stop()
    recorded.save(out)
    log(f"  {len(recorded.exchanges)} exchanges -> {out}: {', '.join(sorted(recorded.exchanges))}")
    return recorded


def load_or_record(path: Path | None, log: Callable[[str], None] = lambda _m: None) -> tuple[Recordings, Path]:
    """The recordings at ``path`` (default: the cache for this product's version and sources),
    recorded first when the file is not there yet."""
    from .recordings import default_path

    path = path or default_path()
    if not path.exists():
        log(f"fleet-sim: recording the product's replies once (-> {path})")
        record(path, log)
    recordings = Recordings.load(path)
    if recordings.meta.get("product_key") != product_key():
        log(f"fleet-sim: note: {path} was recorded from other introspect sources "
            f"({recordings.meta.get('product_key')} vs {product_key()}); its replies may be stale")
    return recordings, path


def main_record(out: Path | None, if_missing: bool = False) -> int:
    """``record``: one JSON line on stdout naming the file and its exchanges."""
    from .recordings import default_path

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    out = out or default_path()
    rec = load_or_record(out, log)[0] if if_missing else record(out, log)
    print(json.dumps({"recordings": str(out), "exchanges": sorted(rec.exchanges)}))
    return 0
