"""The Python API: the same work and the same documents as the CLI, without the terminal.

Every call is typed in and typed out, prints nothing, and answers with the pydantic model of
the document its command prints with ``--json`` (attribute access, ``.to_json()``, ``.to_dict()``;
the JSON Schemas are ``introspect schema NAME``):

- :func:`probe` -> :class:`~introspect.client.model.ProbeOutcome`: ``.document`` is the typed
  ``introspect.profile/v1`` (:class:`~introspect.documents.profile.ProfileDocument`), ``.code``
  the CLI's exit code, ``.profile`` the same document as a dict;
- :func:`preflight` -> :class:`~introspect.client.preflight.PreflightReport` (``.ready``,
  ``.checks``, ``.to_document()`` = ``introspect preflight --json``, typed);
- :func:`health` -> :class:`~introspect.documents.health.HealthDocument` (``introspect health
  --json``; nothing is written to the history database);
- :func:`plan`, :func:`diff`, :func:`models` -> ``PlanDocument``, ``DiffDocument``,
  ``ModelsDocument`` (:mod:`introspect.api_documents`).

:mod:`introspect.aio` has the same calls as coroutines, for embedding in an asyncio service.

Where the CLI prints ``error:``/``fix:`` and exits 2 or 3, these raise the same
:class:`~introspect.errors.IntrospectError` subclass (``.message``, ``.hint``,
``.exit_code``). How to reach a host is one :class:`SSH` value; without ``host`` the
work runs on this machine. The examples below run in the test suite against a real
sshd on 127.0.0.2 (``tests/api/test_api.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from introspect.client.model import DEFAULT_DEADLINE_S, ProbeOutcome, ProbeRequest
from introspect.errors import EXIT_USAGE, InterpreterError, IntrospectError, UsageError
from introspect.remote.contract import DEFAULT_TOKENIZER_TIMEOUT

if TYPE_CHECKING:
    from introspect.api_documents import diff, models, plan
    from introspect.cli.connect import ConnectionFlags
    from introspect.client.preflight import PreflightReport
    from introspect.documents.health import HealthDocument
    from introspect.inventory import HostEntry, Inventory
    from introspect.transport.base import Executor
    from introspect.transport.hostkeys import KnownHosts

__all__ = ["SSH", "ProbeOutcome", "diff", "fatal_input", "health", "models", "plan", "preflight", "probe"]

# Model-directory states after which nothing was read: a report would be all unknowns.
NOTHING_READ = frozenset({"not-found", "not-a-directory", "permission-denied", "symlink-loop"})


@dataclass(frozen=True)
class SSH:
    """How to reach a host: the CLI's connection flags (``--port``, ``--identity`` ...).

    Unset fields fall back as in the CLI: the inventory entry, ``~/.ssh/config``, then
    the built-in defaults (strict host keys, 5 s connect timeout).
    """

    port: int | None = None
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    known_hosts: str | None = None
    accept_new: bool = False
    ssh_config: str | None = None
    connect_timeout: float | None = None
    transport: str | None = None


def _flags(host: str | None, ssh: SSH) -> ConnectionFlags:
    """The CLI's connection flags for ``ssh``; the flags SSH does not name (``--hosts``, ``--banner-timeout``
    ...) keep the CLI's defaults (tests/api/test_api_flags.py: every SSH field reaches its flag)."""
    from introspect.cli.connect import ConnectionFlags

    return ConnectionFlags(host=host, port=ssh.port, user=ssh.user, identity=ssh.identity, jump=ssh.jump,
                           known_hosts=ssh.known_hosts, accept_new=ssh.accept_new, ssh_config=ssh.ssh_config,
                           connect_timeout=ssh.connect_timeout, hosts_file=None, transport=ssh.transport)


def _executor(host: str | None, ssh: SSH, inventory: Inventory | None,
              known: KnownHosts | None = None) -> tuple[Executor, HostEntry | None]:
    from introspect.cli.connect import executor_for

    return executor_for(_flags(host, ssh), inventory, known)


def _inventory(hosts_file: str | Path | None) -> Inventory | None:
    if hosts_file is None:
        return None
    from introspect.inventory import InventoryError, load_inventory

    try:
        return load_inventory(hosts_file)
    except InventoryError as exc:
        raise UsageError(str(exc), hint="# fix the inventory file (see docs/inventories.md)") from None


def fatal_input(outcome: ProbeOutcome) -> IntrospectError | None:
    """The error of a probe that read nothing (missing model dir, unusable venv), else None."""
    if outcome.code != EXIT_USAGE:
        return None
    fatal = outcome.raw.get("fatal") or {}
    if fatal.get("exit_code") == EXIT_USAGE:
        kind: type[IntrospectError] = InterpreterError if fatal.get("type") == "InterpreterError" else UsageError
        return kind(str(fatal.get("message")), hint=fatal.get("hint"), host=fatal.get("host") or None)
    files = outcome.raw.get("files")
    if files and files.get("status") in NOTHING_READ and isinstance(outcome.error, UsageError):
        return outcome.error
    return None


def probe(model: str, *, host: str | None = None, ssh: SSH = SSH(), venv: str | None = None,
          python: str | None = None, remote_code: bool = True, tokenizer: bool = True,
          timeout: float = DEFAULT_TOKENIZER_TIMEOUT, deadline: float = DEFAULT_DEADLINE_S,
          cache: bool = True, hosts_file: str | Path | None = None) -> ProbeOutcome:
    """Profile the model directory ``model`` on ``host`` (this machine when None).

    Raises :class:`~introspect.errors.ConnectError` when the host cannot be reached and
    :class:`~introspect.errors.UsageError` (or ``InterpreterError``) when nothing could be
    read; any other problem is a finding in ``outcome.profile["findings"]``.

    >>> from introspect import SSH, probe
    >>> outcome = probe(MODEL, host=HOST, ssh=SSH(port=PORT, identity=KEY, known_hosts=KNOWN_HOSTS,
    ...                 ssh_config="/dev/null"), venv=VENV, tokenizer=False)
    >>> outcome.document.architecture.model_type, outcome.document.architecture.num_layers
    ('kimi_k25', 61)
    >>> outcome.document.architecture.attention.type, outcome.code
    ('MLA', 0)
    >>> outcome.to_json() == outcome.document.to_json()
    True
    """
    inventory = _inventory(hosts_file)
    executor, entry = _executor(host, ssh, inventory)
    request = ProbeRequest(model=model, venv=venv, python_exe=python, timeout=timeout,
                           no_remote_code=not remote_code, no_tokenizer=not tokenizer, deadline=deadline,
                           no_cache=not cache)
    from introspect.client.model import probe_model

    outcome = probe_model(request, executor, entry)
    fatal = fatal_input(outcome)
    if fatal is not None:
        raise fatal
    return outcome


def preflight(model: str, *, host: str | None = None, ssh: SSH = SSH(), venv: str | None = None,
              python: str | None = None, endpoint: str | None = None, api_key_env: str | None = None,
              output_dir: str | None = None, min_free_gb: float = 50.0, packages: Sequence[str] = (),
              timeout: float | None = None, remote_code: bool = True,
              hosts_file: str | Path | None = None) -> PreflightReport:
    """Is ``host`` ready to generate training data with ``model``? The seven checks of
    ``introspect preflight``; ``report.ready`` is the CLI's exit 0.

    >>> from introspect import SSH, preflight
    >>> report = preflight(MODEL, host=HOST, ssh=SSH(port=PORT, identity=KEY, known_hosts=KNOWN_HOSTS,
    ...                    ssh_config="/dev/null"), venv=VENV, min_free_gb=0)
    >>> [check.name for check in report.checks][:2]
    ['tokenizer', 'chat-template']
    >>> report.checks[0].status
    'pass'
    >>> report.to_document().checks[0].name
    'tokenizer'
    """
    from introspect.client.preflight import DEFAULT_TIMEOUT, PreflightRequest, run_preflight

    request = PreflightRequest(model=model, venv=venv, python_exe=python, endpoint=endpoint,
                               api_key_env=api_key_env, output_dir=output_dir, min_free_gb=min_free_gb,
                               packages=tuple(packages), timeout=timeout or DEFAULT_TIMEOUT,
                               no_remote_code=not remote_code)
    executor, entry = _executor(host, ssh, _inventory(hosts_file))
    return run_preflight(request, executor, entry, local=host is None)


def health(hosts_file: str | Path, *, only: Sequence[str] = (), tags: Sequence[str] = (),
           parallel: int | None = None, ssh: SSH = SSH(), timeout: float | None = None) -> HealthDocument:
    """Check the venvs of the inventory's hosts (``introspect health --json``, without the history).

    >>> from introspect import SSH, health
    >>> document = health(INVENTORY, ssh=SSH(ssh_config="/dev/null"))
    >>> [(host.name, host.reachable) for host in document.hosts], document.exit_code
    ([('gpu-1', True)], 0)
    >>> sorted({check.status for check in document.hosts[0].venvs[0].checks} - {"info"})
    ['pass']
    """
    import time

    from introspect.checks.health import exit_code
    from introspect.cli.connect import known_hosts_for
    from introspect.cli.outcome import combined
    from introspect.client.fleet import FleetMonitor
    from introspect.client.health import HealthOptions, all_results, run_health
    from introspect.client.health_document import run_document
    from introspect.documents.health import HealthDocument
    from introspect.errors import EXIT_UNREACHABLE
    from introspect.inventory import InventoryError, select_hosts

    inventory = _inventory(hosts_file)
    assert inventory is not None
    try:
        hosts = select_hosts(inventory, only, tags)
    except InventoryError as exc:
        raise UsageError(str(exc), hint="# check only= and tags= against the inventory") from None
    known = known_hosts_for(_flags(None, ssh), inventory)  # parsed once for every host

    def make(entry: HostEntry) -> Executor:
        return _executor(entry.name, ssh, inventory, known)[0]

    options = HealthOptions(probe_timeout=timeout or inventory.defaults.probe_timeout)
    workers = parallel or inventory.defaults.parallel
    monitor, started = FleetMonitor(0.0), time.time()  # logins paced per sshd (client/fleet_pacing.py)
    reports = run_health(hosts, make, parallel=workers, options=options, monitor=monitor)
    code = combined([exit_code(all_results(reports)), *(EXIT_UNREACHABLE for r in reports if not r.reachable)])
    history: dict[str, object] = {"db": None, "recorded": False, "run_id": None, "warnings": []}  # the API records nothing
    document = run_document(reports, None, started, time.time(), code, {"parallel": workers, **monitor.stats()},
                            history)
    return HealthDocument.model_validate(document)


def __getattr__(name: str) -> Any:
    # plan / diff / models live in api_documents, imported on first use: `introspect probe` imports
    # this module for fatal_input and must not pay for the aggregator (tests/cli/test_lazy_imports.py).
    if name in ("diff", "models", "plan"):
        from introspect import api_documents

        return getattr(api_documents, name)
    raise AttributeError(f"module 'introspect.api' has no attribute {name!r}")
