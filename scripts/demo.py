"""Built-in demo: probe a Kimi-K2.6-like model over a throwaway loopback sshd.

Run through ``scripts/demo`` (which sets up .venv first). Everything lives in
a temp dir that is removed at the end; nothing is sent beyond 127.0.0.2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures.kimi_model import build_kimi_model  # noqa: E402
from tests.fixtures.venvs import make_venv  # noqa: E402
from tests.sshd_server import ClientKeys, start_sshd, trust  # noqa: E402


def run_probe(server, client: ClientKeys, model: Path, venv: Path, extra: list[str]) -> int:
    argv = [sys.executable, "-m", "introspect.cli.main", "probe", "--host", server.address,
            "--port", str(server.port), "--identity", str(client.key), "--known-hosts",
            str(client.known_hosts), "--ssh-config", "/dev/null", "--model", str(model),
            "--venv", str(venv), *extra]
    shown = " ".join(a if " " not in a else repr(a) for a in argv[3:])
    print(f"\n$ introspect {shown}\n", flush=True)
    started = time.monotonic()
    code = subprocess.call(argv)
    print(f"[exit code {code}, {time.monotonic() - started:.2f} s wall]", flush=True)
    return code


def write_report(profile: Path, report: Path) -> int:
    """The healthy probe's profile as one self-contained HTML page; its path printed last."""
    argv = [sys.executable, "-m", "introspect.cli.main", "report", str(profile), "-o", str(report)]
    print(f"\n$ introspect report {profile.name} -o {report}", flush=True)
    code = subprocess.call(argv)
    if code == 0:
        print(f"demo: the report is {report} (open it in a browser; it fetches nothing)", flush=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the profile JSON instead of the report")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (prints its path)")
    parser.add_argument("--report", type=Path, default=Path(tempfile.gettempdir()) / "introspect-demo-report.html",
                        help="where the demo's HTML report goes (outside the temp dir, which is removed)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="introspect-demo-"))
    server = None
    try:
        print(f"demo: building a Kimi-K2.6-like model, two venvs and an sshd on 127.0.0.2 in {tmp}", flush=True)
        model = build_kimi_model(tmp / "models" / "Kimi-K2.6")
        good = make_venv(tmp / "venv_sglang")
        broken = make_venv(tmp / "venv_no_tiktoken", exclude={"tiktoken"})
        client = ClientKeys(tmp / "client")
        server = start_sshd(tmp / "sshd", client, address="127.0.0.2")
        trust(server, client)
        extra = ["--json"] if args.json else []
        profile = tmp / "kimi.json"
        code = run_probe(server, client, model, good, [*extra, "--output", str(profile)])
        print("\ndemo: the same model from a venv that lacks tiktoken (the classic failure):", flush=True)
        run_probe(server, client, model, broken, extra)
        return write_report(profile, args.report) or code
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"demo: kept {tmp}")
        else:
            subprocess.call(["rm", "-rf", str(tmp)])


if __name__ == "__main__":
    sys.exit(main())
