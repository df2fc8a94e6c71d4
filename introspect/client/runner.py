"""The one channel runner: several remote tasks at once over one executor connection.

Every command that needs a quick stdlib task *and* a slow tokenizer load runs them
as separate channels of one connection, each with its own interpreter, request and
timeout, the tokenizer task isolated in its own process group. The quick facts then
never wait for the slow load, and a crash or hang in it costs nothing else. probe
(model + tokenizer), preflight (light + tokenizer parts) and health (one health task
per venv, one tokenizer task per model) all go through :func:`run_channels`.

A channel's failure is its own result (:attr:`ChannelResult.error`); what it means
(fatal, one error record, one failed check) is the caller's decision.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from introspect.errors import IntrospectError
from introspect.remote.contract import DEFAULT_FILES_TIMEOUT, TargetBlock
from introspect.transport.base import Executor, ProbeReply


@dataclass(frozen=True)
class Channel:
    """One remote task to run on its own channel."""

    key: Hashable  # how the caller finds its result
    python: str
    task: str
    request: dict[str, Any] = field(hash=False, compare=False)
    timeout: float = DEFAULT_FILES_TIMEOUT
    isolate: bool = False


@dataclass
class ChannelResult:
    channel: Channel
    reply: ProbeReply | None = None
    error: Exception | None = None  # why there is no reply (an IntrospectError, or a bug)

    @property
    def facts(self) -> dict[str, Any] | None:
        facts = self.reply.facts if self.reply is not None else None
        return facts if isinstance(facts, dict) else None


def run_channels(executor: Executor, channels: Sequence[Channel], *,
                 max_parallel: int | None = None) -> dict[Hashable, ChannelResult]:
    """Run every channel (at most ``max_parallel`` at once); results keyed like the channels.

    Connects first, outside any thread, so host, auth and host-key errors raise here
    before anything started. On Ctrl-C (or a crash) the executor is closed before the
    exception propagates: the remote watchdogs then kill their task groups at once.
    """
    executor.connect()
    if not channels:
        return {}
    workers = max(1, min(max_parallel or len(channels), len(channels)))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="channel")
    try:
        futures = {channel.key: pool.submit(_run_one, executor, channel) for channel in channels}
        return {key: future.result() for key, future in futures.items()}
    except BaseException:
        executor.close()
        raise
    finally:
        pool.shutdown(wait=True)


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


def error_record(task: str, exc: IntrospectError) -> dict[str, Any]:
    """A failed channel as one entry of a reply's ``errors`` list."""
    return {"probe": task, "type": type(exc).__name__, "message": exc.message, "hint": exc.hint,
            "stage": exc.stage}
