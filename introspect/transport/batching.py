"""A batch on the controller's side: several tasks, one session, one reply frame per task.

Every exec runs the target user's login shell and its rc files (``conda init`` and
the like cost tens to hundreds of milliseconds per session), so the tasks that share
an interpreter go in one envelope (:func:`shipping.batch_envelope`) and the host runs
them at once (:mod:`introspect.remote.batch`), isolated ones still in their own
supervised child. Each item's outcome is its own: a reply, or the error that says why
there is none (the session's, when it failed as a whole).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from introspect.errors import IntrospectError, ProtocolError
from introspect.transport import shipping
from introspect.transport.base import GRACE_S, BatchItem, ExecResult, ProbeReply

if TYPE_CHECKING:
    from introspect.remote.contract import Reply
    from introspect.transport.base import Executor


class BatchStopped(Exception):
    """An item that did not run because an earlier one's ``stop_if_digest`` matched."""


def run_batch(executor: Executor, python: str, items: list[BatchItem]) -> list[ProbeReply | Exception]:
    payload = shipping.batch_envelope([{"key": i, "task": item.task, "request": item.request,
                                        "isolate": item.isolate, "timeout": item.timeout,
                                        "stop_if_digest": item.stop_if_digest}
                                       for i, item in enumerate(items)])
    chunks: list[bytes] = []
    timeout = max(item.timeout for item in items) + GRACE_S
    try:
        result = executor.execute(shipping.command_argv(python), payload, timeout, stdout_sink=chunks)
    except IntrospectError as exc:
        # The session ended badly (the connection dropped, the deadline closed it): the tasks
        # that had answered keep their replies, the others get the session's error.
        failed = exc
        return _each(executor, python, items, b"".join(chunks), 0.0, "", lambda _item, _answered: failed)
    stderr = result.stderr.decode("utf-8", "replace")
    return _each(executor, python, items, result.stdout, result.seconds, stderr,
                 lambda item, answered: _missing(executor, python, item, result, stderr, answered))


def _each(executor: Executor, python: str, items: list[BatchItem], stdout: bytes, seconds: float, stderr: str,
          missing: Callable[[BatchItem, bool], Exception]) -> list[ProbeReply | Exception]:
    """A reply or an error for every item, read off the frames on stdout."""
    replies, problem = _frames(stdout)
    if isinstance(problem, IntrospectError) and problem.host is None:
        problem.host = executor.label  # which host's output was damaged
    if None in replies:  # an interpreter too old for the probe says so once, for every task
        try:
            executor._check_fatal(python, replies.pop(None))
        except IntrospectError as exc:
            problem = exc
    stopped = any(r.get("stopped") for r in replies.values() if r is not None)
    out: list[ProbeReply | Exception] = []
    for i, item in enumerate(items):
        reply = replies.get(i)
        if problem is not None:
            out.append(problem)
        elif reply is None and stopped:
            out.append(BatchStopped(f"the {item.task} task did not run: the batch stopped at its check"))
        elif reply is None:
            out.append(missing(item, bool(replies)))
        else:
            out.append(executor._probe_reply(item.task, reply, seconds, stderr))
    return out


def _frames(stdout: bytes) -> tuple[dict[int | None, Reply], Exception | None]:
    """The replies by key (the last valid frame of each key answers), and the error that spoiled
    the output, if any.

    An interpreter too old for the probe writes one keyless ``fatal`` frame and nothing after it,
    so only a last frame counts as fatal: a stale one a login script printed before the batch's
    own replies must not discard them (nor a keyless frame stand for a task).
    """
    try:
        frames = shipping.parse_frames(stdout)
    except ProtocolError as exc:
        return {}, exc
    if frames and frames[-1].get("fatal"):
        return {None: frames[-1]}, None
    return {f["key"]: f for f in frames if f.get("key") is not None and not f.get("fatal")}, None


def _missing(executor: Executor, python: str, item: BatchItem, result: ExecResult, stderr: str,
             others_answered: bool) -> Exception:
    """Why an item has no reply: the session's own failure (it timed out, was killed, or nothing
    answered at all), else its task's."""
    if not others_answered or result.timed_out or result.exit_status != 0:
        return executor._no_reply_error(python, item.task, result, stderr, item.timeout)
    return ProtocolError(f"the {item.task} probe gave no reply in its batch",
                         hint="# rerun; if it persists, report it with --debug", host=executor.label, stage=item.task)
