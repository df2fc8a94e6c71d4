"""``introspect env``: what a bug report needs, with secrets left out.

Versions come from the installed distributions' metadata (nothing heavy is imported:
``env`` answers in well under a second even where transformers takes seconds to load).
Environment variables are shown by name; the value only for the few that are paths or
switches, never for anything whose name looks secret (:func:`introspect.redact.is_secret_name`,
the host's rule), and even then masked by the shared patterns (a password in a URL).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from introspect import __version__
from introspect.cli import help_examples
from introspect.cli.jsonout import echo_json
from introspect.cli.safe_text import visible
from introspect.cli.session import session
from introspect.redact import is_secret_name, scrub

if TYPE_CHECKING:
    from introspect.documents.small import EnvDocument, PathFact
    from introspect.userconfig import ChosenJSON

SCHEMA: Final = "introspect.env/v1"
DISTRIBUTIONS = ("paramiko", "invoke", "click", "rich", "pyyaml", "platformdirs", "packaging",
                 "prometheus_client", "transformers", "tokenizers", "tiktoken", "huggingface_hub", "jinja2")
# Variables whose value is shown: paths and switches that change what introspect does.
SHOWN_VALUES = ("INTROSPECT_CACHE_DIR", "INTROSPECT_CONFIG", "INTROSPECT_HOSTS", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE", "SSH_AUTH_SOCK", "COLUMNS", "NO_COLOR", "TERM")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def redacted_environment(environ: dict[str, str]) -> dict[str, str]:
    """Relevant variables: shown values for :data:`SHOWN_VALUES`, ``<set>`` for the rest
    (every ``INTROSPECT_*``/``HF_*`` variable, whose value may be a token)."""
    out: dict[str, str] = {}
    for name in sorted(environ):
        relevant = name in SHOWN_VALUES or name.startswith(("INTROSPECT_", "HF_"))
        if not relevant:
            continue
        # SSH_AUTH_SOCK names a socket path, not a secret, whatever "AUTH" says.
        secret = is_secret_name(name) and name != "SSH_AUTH_SOCK"
        out[name] = scrub(environ[name]) if name in SHOWN_VALUES and not secret else "<set>"
    return out


def _paths() -> dict[str, PathFact]:
    from introspect.checks.history import default_path
    from introspect.client.cache import default_dir
    from introspect.documents.small import PathFact
    from introspect.userconfig import user_dir

    home = Path.home()
    paths = {
        "config dir": user_dir("config"),  # where config_path() looks, XDG fallback included
        "history database": default_path(),
        "result cache": default_dir(),
        "ssh config": home / ".ssh" / "config",
        "known_hosts": home / ".ssh" / "known_hosts",
        "global known_hosts": Path("/etc/ssh/ssh_known_hosts"),
    }
    return {name: PathFact(path=str(path), exists=path.exists()) for name, path in paths.items()}


def _settings() -> dict[str, ChosenJSON]:
    """Each user-config setting, its value and where it came from (a bad config: its error)."""
    from introspect.errors import UsageError
    from introspect.userconfig import ChosenJSON, config_settings

    try:
        return {name: chosen.as_dict() for name, chosen in config_settings().items()}
    except UsageError as exc:  # a bug report still needs the rest of the document
        return {"error": ChosenJSON(value=None, source="config", where=str(exc))}


def _setting_line(name: str, item: Mapping[str, object]) -> str:
    """A setting of the env document (``ChosenJSON``: its value any YAML scalar) as a line."""
    value = "-" if item["value"] is None else item["value"]
    if name.startswith("remote_code") and item["value"] is not None:
        value = "allowed" if item["value"] else "refused"
    if "[" in name:  # a remote_code pattern: its file is on the remote_code line above
        base, _, pattern = name.partition("[")
        return f"  {base:<18} {pattern.strip(chr(34) + ']')}: {value}"
    source = item["where"] if item["source"] == "default" else f"from {item['where']}"
    return f"  {name:<18} {value}  ({source})"


def environment_document() -> EnvDocument:
    from introspect.documents import small

    return small.EnvDocument(
        schema=SCHEMA,
        introspect=small.Installed(version=__version__, location=str(Path(__file__).resolve().parent.parent)),
        python=small.PythonFacts(version=platform.python_version(), implementation=platform.python_implementation(),
                                 executable=sys.executable),
        platform=small.PlatformFacts(system=platform.system(), release=platform.release(),
                                     machine=platform.machine(), platform=platform.platform()),
        packages={name: _version(name) for name in DISTRIBUTIONS},
        paths=_paths(),
        settings={name: dict(chosen) for name, chosen in _settings().items()},
        environment=redacted_environment(dict(os.environ)),
    )


@click.command("env", epilog=help_examples.ENV)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON on stdout.")
def env(as_json: bool) -> int:
    """Versions, platform and config paths for a bug report (secrets are never shown)."""
    doc = environment_document()
    if as_json:
        echo_json(doc.to_dict())
        return 0
    if session().quiet:
        return 0
    lines = [f"introspect {doc.introspect.version} ({doc.introspect.location})",
             f"python     {doc.python.version} {doc.python.implementation} ({doc.python.executable})",
             f"platform   {doc.platform.platform}", "", "packages:"]
    lines += [f"  {name:<18} {version or '-'}" for name, version in doc.packages.items()]
    lines += ["", "paths:"]
    lines += [f"  {name:<18} {item.path}{'' if item.exists else '  (absent)'}" for name, item in doc.paths.items()]
    lines += ["", "settings:"]
    lines += [_setting_line(name, item) for name, item in doc.settings.items()]
    if doc.environment:
        lines += ["", "environment:"]
        lines += [f"  {name}={value}" for name, value in doc.environment.items()]
    from introspect.cli.render_term import fold_lines  # a long one folds at words; pasted into issues as is

    click.echo("\n".join(folded for line in lines for folded in fold_lines(visible(line))))
    return 0
