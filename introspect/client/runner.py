"""The one channel runner: several remote tasks at once over one executor connection.

Every command that needs a quick stdlib task *and* a slow tokenizer load runs them
over one connection, each with its own request and timeout, the tokenizer task
isolated in its own process group; tasks under the same interpreter share one
session (one exec, so the login shell's rc files run once), others get their own. The quick facts then
never wait for the slow load, and a crash or hang in it costs nothing else. probe
(model + tokenizer), preflight (light + tokenizer parts) and health (one health task
per venv, one tokenizer task per model) all go through :func:`run_channels`.

A channel's failure is its own result (:attr:`ChannelResult.error`); what it means
(fatal, one error record, one failed check) is the caller's decision.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from introspect.errors import IntrospectError
from introspect.interrupts import Terminated, signum_of
from introspect.redact import scrub_fields
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    ErrorRecord,
    JSONObject,
    TargetBlock,
)
from introspect.transport.base import BatchItem, Executor, ProbeReply

if TYPE_CHECKING:  # a shape: contract imports the TypedDict modules on their first use only
    from introspect.remote.contract import TaskRequest


@dataclass(frozen=True)
class Channel:
    """One remote task to run on its own channel."""

    key: Hashable  # how the caller finds its result
    python: str
    task: str
    request: TaskRequest = field(hash=False, compare=False)
    timeout: float = DEFAULT_FILES_TIMEOUT
    isolate: bool = False
    # In a batch: run first, and when its reply's facts carry this ``digest`` run nothing
    # else (the other channels then end with BatchStopped). A cache check in the same session.
    stop_if_digest: str | None = field(default=None, hash=False, compare=False)


@dataclass
class ChannelResult:
    channel: Channel
    reply: ProbeReply | None = None
    error: Exception | None = None  # why there is no reply (an IntrospectError, or a bug)

    @property
    def facts(self) -> JSONObject | None:
        """The task's facts as the host sent them (its task's reply shape), when they are an object."""
        facts = self.reply.facts if self.reply is not None else None
        return facts if isinstance(facts, dict) else None


class ChannelsInterrupted(Terminated):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) stopped :func:`run_channels`: every channel was closed;
    ``results`` holds those that had finished (the others are missing from it)."""

    def __init__(self, signum: int, results: dict[Hashable, ChannelResult]) -> None:
        super().__init__(signum)
        self.results = results


def run_channels(executor: Executor, channels: Sequence[Channel], *,
                 max_parallel: int | None = None) -> dict[Hashable, ChannelResult]:
    """Run every channel (at most ``max_parallel`` at once); results keyed like the channels.

    Connects first, outside any thread, so host, auth and host-key errors raise here
    before anything started. On Ctrl-C (or a crash) the executor is closed before the
    exception propagates: the remote watchdogs then kill their task groups at once.
    A signal propagates as :class:`ChannelsInterrupted`, with the channels that finished.
    """
    executor.connect()
    if not channels:
        return {}
    sessions = _sessions(channels)
    if len(sessions) == 1 and threading.current_thread() is not threading.main_thread():
        # One session in a fleet's worker: run it here, not in a pool of one thread per host.
        # Signals reach only the main thread, so there is no interrupted pool to account for.
        try:
            return {r.channel.key: _scrubbed(r) for r in _run_session(executor, sessions[0])}
        except BaseException:
            executor.close()
            raise
    workers = max(1, min(max_parallel or len(sessions), len(sessions)))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="channel")
    futures: list[concurrent.futures.Future[list[ChannelResult]]] = []
    try:
        futures = [pool.submit(_run_session, executor, session) for session in sessions]
        results = {r.channel.key: r for future in futures for r in future.result()}
        return {channel.key: _scrubbed(results[channel.key]) for channel in channels}
    except KeyboardInterrupt as exc:
        before = [future.done() for future in futures]  # before the close turns the rest into errors
        executor.close()
        pool.shutdown(wait=True)  # prompt: their processes are gone
        raise ChannelsInterrupted(signum_of(exc), _finished(futures, before)) from exc
    except BaseException:
        executor.close()
        raise
    finally:
        pool.shutdown(wait=True)


def _finished(futures: Sequence[concurrent.futures.Future[list[ChannelResult]]],
              done_before: Sequence[bool]) -> dict[Hashable, ChannelResult]:
    """The results of the channels that finished before the signal: every channel of a session
    that had ended (its errors are real), and the replies of a session the close cut short (a
    batch's tasks that had answered; its others failed only because the signal closed them)."""
    out: dict[Hashable, ChannelResult] = {}
    for future, done in zip(futures, done_before, strict=True):
        if future.cancelled() or future.exception() is not None:
            continue
        out.update({r.channel.key: _scrubbed(r) for r in future.result() if done or r.reply is not None})
    return out


def _scrubbed(result: ChannelResult) -> ChannelResult:
    """The reply with secrets masked before anything reads it: the host masks its environment
    already; this catches the rest (an import error quoting a URL with a token, say)."""
    if result.reply is not None:
        result.reply = scrub_fields(result.reply)
    return result


def _sessions(channels: Sequence[Channel]) -> list[list[Channel]]:
    """The channels grouped by interpreter, in order: each group is one remote session.

    Every exec runs the user's login shell and its rc files (``conda init`` and the like),
    so tasks under the same interpreter share one (:meth:`Executor.run_batch`)."""
    groups: dict[str, list[Channel]] = {}
    for channel in channels:
        groups.setdefault(channel.python, []).append(channel)
    return list(groups.values())


def _run_session(executor: Executor, session: list[Channel]) -> list[ChannelResult]:
    if len(session) == 1:
        return [_run_one(executor, session[0])]
    try:
        outcomes = executor.run_batch(session[0].python, [BatchItem(c.task, c.request, c.timeout, c.isolate,
                                                                    c.stop_if_digest) for c in session])
    except Exception as exc:  # noqa: BLE001 - the session's failure is each of its channels' result
        return [ChannelResult(channel, error=exc) for channel in session]
    return [ChannelResult(channel, error=outcome) if isinstance(outcome, Exception)
            else ChannelResult(channel, reply=outcome) for channel, outcome in zip(session, outcomes, strict=True)]


def _run_one(executor: Executor, channel: Channel) -> ChannelResult:
    try:
        reply = executor.run_python(channel.python, channel.task, channel.request, timeout=channel.timeout,
                                    isolate=channel.isolate)
    except Exception as exc:  # noqa: BLE001 - one channel's failure is that channel's result
        return ChannelResult(channel, error=exc)
    return ChannelResult(channel, reply=reply)


def target_of(executor: Executor, python: str, venv: str | None, model_path: str) -> TargetBlock:
    """The ``target`` block of a profile or report: where, under which interpreter, what."""
    target = executor.target
    block = TargetBlock(scheme=target.scheme, host=target.host, port=target.port, user=target.user,
                        python=python, venv=venv, model_path=model_path)
    if target.container:
        # contract.TargetBlock does not name "container" yet (the remote side owns that module).
        block["container"] = target.container
    return block


def error_record(task: str, exc: IntrospectError) -> ErrorRecord:
    """A failed channel as one entry of a reply's ``errors`` list."""
    return ErrorRecord(probe=task, type=type(exc).__name__, message=exc.message, hint=exc.hint, stage=exc.stage)
