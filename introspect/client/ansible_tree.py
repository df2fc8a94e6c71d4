"""Results of the ``introspect.models`` Ansible collection, read back as if introspect had run them.

``ansible HOSTS -m introspect.models.venv_health ... --tree DIR`` (or a playbook with the
``ansible.builtin.tree`` callback) leaves one JSON file per host in ``DIR``: the module's
result, whose ``ansible_facts`` hold one record per remote task (request, framed reply,
exit status, stderr tail), or Ansible's own ``unreachable``/``failed`` and ``msg``.

:class:`AnsibleResultExecutor` is an executor over one such file: ``connect()`` fails as
an unreachable host does, ``run_python()`` answers each task from its record through the
base class's own reply interpretation. So ``probe`` and ``health`` code runs unchanged on
Ansible's results, and the profiles, health reports, history rows and Prometheus output
are the ones a native run makes.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from introspect.errors import ConnectError, InputError, InterpreterError, RemoteError
from introspect.remote.contract import BEGIN, END, JSONObject, Reply, TargetBlock, TaskRequest
from introspect.transport.base import (
    BatchItem,
    ExecResult,
    Executor,
    ProbeReply,
    RemoteProcess,
    Target,
    interpreter_hint,
)

MAX_RESULT_BYTES = 256 * 1024 * 1024  # one host's result; a model's facts are a few MiB at most
FACTS_SCHEMA = "introspect.ansible-facts/v1"
_MODULES = {"introspect_model": "model_facts", "introspect_health": "venv_health",
            "introspect_models": "discover_models"}
_HINT = "pass the directory written by `ansible ... -m introspect.models.<module> --tree DIR`"


class RecordedCall(TypedDict, total=False):
    """One remote task the module ran (integrations/ansible: its ``calls`` list): what was asked, under
    which interpreter, and how the process ended (its reply frame, or why there is none)."""

    task: str
    python: str
    request: JSONObject  # the task's request as the playbook gave it to the module
    timeout: float
    reply: Reply | None
    stdout_tail: str
    stderr_tail: str
    exit_status: int | None
    timed_out: bool
    seconds: float
    spawn_error: dict[str, str] | None  # {type, message}: the interpreter could not be started


class ModuleFacts(TypedDict, total=False):
    """``introspect.ansible-facts/v1``: what our Ansible modules leave in ``ansible_facts``."""

    schema: str
    calls: list[RecordedCall]
    target: TargetBlock
    options: dict[str, bool]  # model_facts: remote_code, load_tokenizer, load_model_code as asked
    skipped_in_check_mode: list[str]
    venvs: list[JSONObject]  # venv_health: the venvs it was given, as hosts.yaml entries


@dataclass(frozen=True)
class HostResult:
    """One host's file of the tree."""

    name: str
    path: str
    result: JSONObject  # Ansible's result of the task, as its callback wrote it

    @property
    def unreachable(self) -> bool:
        return bool(self.result.get("unreachable"))

    @property
    def failed(self) -> bool:
        """Ansible failed the task. Callbacks never see the ``failed`` key (the event type carries it:
        ``_IGNORE`` in
        https://github.com/ansible/ansible/blob/v2.19.14/lib/ansible/executor/task_result.py),
        so a tree file of a failed task is a result without our facts but with Ansible's ``msg``."""
        if self.result.get("failed"):
            return True
        facts = self.result.get("ansible_facts")
        ours = isinstance(facts, dict) and any(isinstance(facts.get(key), dict) for key in _MODULES)
        return not ours and any(self.result.get(key) for key in ("msg", "module_stderr", "exception"))

    @property
    def message(self) -> str:
        """Ansible's own words: ``msg``, plus the exit status and the module's stderr, which name the
        cause when ``msg`` is only "Module result deserialization failed" (an interpreter that does not run)."""
        msg = _one_line(self.result.get("msg"), 500)
        rc, stderr = self.result.get("rc"), _one_line(self.result.get("module_stderr"), 300, tail=True)
        extra = [f"rc {rc}"] if isinstance(rc, int) and rc else []
        # Interpreter discovery leaves its pick in the failed result too: often the broken one.
        found = (self.result.get("ansible_facts") or {}).get("discovered_interpreter_python")
        if found:
            extra.insert(0, f"discovered interpreter {found}")
        if stderr and stderr not in msg:
            extra.append(f"module stderr: {stderr}")
        if not msg:
            return "; ".join(extra) or "Ansible gave no message"
        return f"{msg} ({'; '.join(extra)})" if extra else msg

    @property
    def fix(self) -> str:
        """A command that shows Ansible's view of the host; an interpreter that could not run
        (rc 126/127, a shim) is fixed in the inventory's ``ansible_python_interpreter``."""
        ping = f"ansible {shlex.quote(self.name)} -m ansible.builtin.ping -vvv"
        if self.result.get("rc") in (126, 127) or "interpreter" in self.message.lower():
            return f"{ping}  # then fix ansible_python_interpreter for {self.name}"
        return f"{ping}  # Ansible's own error for this host, in full"

    def facts(self, key: str) -> ModuleFacts | None:
        facts = (self.result.get("ansible_facts") or {}).get(key)
        # Our module's facts, told apart from anything else in the file by their schema.
        return cast(ModuleFacts, facts) if isinstance(facts, dict) and facts.get("schema") == FACTS_SCHEMA else None


def read_tree(directory: str) -> list[HostResult]:
    """Every host's result in ``directory`` (file name = inventory host name), sorted by name."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise InputError(f"--ansible-tree {directory}: not a directory", hint=_HINT)
    results = []
    for path in sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")):
        try:
            if path.stat().st_size > MAX_RESULT_BYTES:
                raise InputError(f"{path}: above the {MAX_RESULT_BYTES}-byte cap for one host's result", hint=_HINT)
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"cannot read Ansible's result {path}: {exc}", hint=_HINT) from None
        if not isinstance(data, dict):
            raise InputError(f"{path} is not an Ansible task result (a JSON object)", hint=_HINT)
        results.append(HostResult(path.name, str(path), data))
    if not results:
        raise InputError(f"--ansible-tree {directory} holds no host results", hint=_HINT)
    return results


class AnsibleResultExecutor(Executor):
    """Answers remote tasks from one host's Ansible result instead of running them."""

    def __init__(self, host: HostResult, facts_key: str) -> None:
        super().__init__(Target("ansible", host=host.name, label=host.name))
        self.host = host
        self.facts_key = facts_key

    @classmethod
    def from_settings(cls, settings: Any) -> AnsibleResultExecutor:  # pragma: no cover - never in the registry
        raise NotImplementedError("built from an Ansible result, not from connection settings")

    def _spawn(self, argv: list[str]) -> RemoteProcess:  # pragma: no cover - nothing is ever spawned
        raise NotImplementedError("an Ansible result runs nothing")

    def connect(self) -> None:
        """Fails as the host failed in Ansible: unreachable, or the module itself failed (no facts)."""
        if self.host.unreachable:
            raise ConnectError(f"Ansible: unreachable: {self.host.message}",
                               hint=f"ansible {shlex.quote(self.host.name)} -m ansible.builtin.ping -vvv",
                               host=self.host.name, stage="ansible")
        if self.host.failed:
            raise RemoteError(f"Ansible: the module failed: {self.host.message}", hint=self.host.fix,
                              host=self.host.name, stage="ansible")

    def run_python(self, python: str, task: str, request: TaskRequest, *, timeout: float,
                   isolate: bool = False) -> ProbeReply:
        self.connect()
        facts = self.host.facts(self.facts_key)
        if facts is None:
            raise RemoteError(f"no {self.facts_key} facts in Ansible's result {self.host.path}",
                              hint=f"run introspect.models.{_MODULES[self.facts_key]} for this report",
                              host=self.host.name, stage=task)
        asked: Mapping[str, object] = request  # any task's request: only "model_path" is read, where it has one
        record = _find(facts.get("calls") or [], python, task, asked)
        if record is None:
            model = f" for {asked['model_path']}" if asked.get("model_path") else ""
            raise RemoteError(f"the Ansible run has no {task} result under {python}{model}",
                              hint="run the module with the same venvs and models as the inventory lists",
                              host=self.host.name, stage=task)
        spawn_error = record.get("spawn_error")
        if spawn_error:
            raise InterpreterError(f"cannot run {python}: {spawn_error.get('message')}", hint=interpreter_hint(python),
                                   host=self.host.name, stage="python")
        return self._interpret(python, task, _exec_result(record), float(record.get("timeout") or timeout))

    def run_batch(self, python: str, items: list[BatchItem]) -> list[ProbeReply | Exception]:
        """Ansible ran each task as its own call: a batch is read back one recorded call at a time."""
        out: list[ProbeReply | Exception] = []
        for item in items:
            try:
                out.append(self.run_python(python, item.task, item.request, timeout=item.timeout,
                                           isolate=item.isolate))
            except Exception as exc:  # noqa: BLE001 - each item's failure is its own, as in a real batch
                out.append(exc)
        return out


def _one_line(text: Any, cap: int, *, tail: bool = False) -> str:
    """``text`` on one line, at most ``cap`` characters (its end when ``tail``: where stderr says why)."""
    flat = " ".join(str(text or "").split())
    return flat[-cap:] if tail else flat[:cap]


def _find(calls: list[RecordedCall], python: str, task: str, request: Mapping[str, object]) -> RecordedCall | None:
    """The call recorded for this task under ``python`` (for this model, when the request names one)."""
    for record in calls:
        if not isinstance(record, dict) or record.get("task") != task or record.get("python") != python:
            continue
        asked = record.get("request") or {}
        if "model_path" in request and asked.get("model_path") != request["model_path"]:
            continue
        return record
    return None


def _exec_result(record: RecordedCall) -> ExecResult:
    """The record as the base executor sees a finished process (its frame back on stdout)."""
    reply = record.get("reply")
    stdout = str(record.get("stdout_tail") or "").encode("utf-8")
    if isinstance(reply, dict):
        stdout += BEGIN + json.dumps(reply).encode("utf-8") + END
    return ExecResult(stdout=stdout, stderr=str(record.get("stderr_tail") or "").encode("utf-8"),
                      exit_status=record.get("exit_status"), timed_out=bool(record.get("timed_out")),
                      seconds=float(record.get("seconds") or 0.0))
