"""Reading the framed replies off a remote interpreter's stdout, trusting none of it.

stdout is the host's: a login script (``/etc/profile``, ``~/.bashrc``), a ``python`` wrapper or
a MOTD hook may print anything before the probe does, including the frame markers and, in the
worst case, a whole frame left over from an older run or another tool. So a frame is used only
once its JSON is read and every member of the envelope has the type the remote side writes
(:class:`introspect.remote.contract.Reply` and :class:`~introspect.remote.contract.ErrorRecord`);
a frame that fails is skipped, and the last valid frame answers. Only when no frame is valid
is the output a protocol error, naming what was wrong with the last one, never a ``ValueError``
from deep inside the controller.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from introspect.errors import ProtocolError
from introspect.remote.contract import BEGIN, END, PROTOCOL

if TYPE_CHECKING:  # a shape: contract imports the TypedDict modules on their first use only
    from introspect.remote.contract import Reply

# Rerunning changes nothing when the host's own start-up files print over the reply: the fix
# names where to look (a comment, so that the ``fix:`` line stays paste-safe).
NOISE_HINT = ("# something on the host prints to stdout before the probe (a login script such as ~/.bashrc or "
              "/etc/profile, or a python wrapper); rerun with --debug to see the remote output")

_NUMBER = (int, float)
_STR_OR_NONE = (str, type(None))
_DICT_OR_NONE = (dict, type(None))
# Reply member -> the types it may have (absent members are always fine: ``total=False``).
_REPLY_TYPES: dict[str, tuple[type, ...]] = {
    "probe_version": _STR_OR_NONE,
    "pid": (int,),
    "facts": _DICT_OR_NONE,  # every task replies with an object, or null when it crashed
    "errors": (list, type(None)),
    "seconds": _NUMBER,
    "supervisor": _DICT_OR_NONE,
    "python": _DICT_OR_NONE,
    "fatal": _DICT_OR_NONE,
    "key": (int, type(None)),  # a batch numbers its items
    "stopped": (bool,),
}
# ErrorRecord member -> its types; records may carry more members (message_size, line, column).
_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "probe": _STR_OR_NONE, "type": (str,), "message": _STR_OR_NONE, "path": _STR_OR_NONE,
    "hint": _STR_OR_NONE, "stage": _STR_OR_NONE, "traceback": (list, type(None)),
}
_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", dict: "an object", list: "a list",
               bool: "true/false", type(None): "null"}


def _kind(value: Any) -> str:
    return "true/false" if isinstance(value, bool) else _TYPE_NAMES.get(type(value), type(value).__name__)


def _wrong(where: str, value: Any, allowed: tuple[type, ...]) -> str | None:
    """Why ``value`` is not one of ``allowed`` (bool is no number here, though Python says it is)."""
    if isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed):
        return None
    names = [_TYPE_NAMES[t] for t in allowed if not (t is int and float in allowed)]
    want = " or ".join(names)
    return f"{where} is {_kind(value)}, not {want}"


def reply_problem(reply: Any) -> str | None:
    """What makes ``reply`` (a decoded frame) unusable, or None when every member has its type."""
    if not isinstance(reply, dict):
        return f"the reply is {_kind(reply)}, not a JSON object"
    if reply.get("protocol") != PROTOCOL or isinstance(reply.get("protocol"), bool):
        return f"the remote probe speaks protocol {reply.get('protocol')!r}, this introspect {PROTOCOL}"
    for name, allowed in _REPLY_TYPES.items():
        if name in reply and (why := _wrong(f"'{name}'", reply[name], allowed)):
            return why
    for i, record in enumerate(reply.get("errors") or []):
        if not isinstance(record, dict):
            return f"'errors[{i}]' is {_kind(record)}, not an object"
        for name, allowed in _RECORD_TYPES.items():
            if name in record and (why := _wrong(f"'errors[{i}].{name}'", record[name], allowed)):
                return why
    return _python_problem(reply.get("python")) or _fatal_problem(reply.get("fatal"))


def _python_problem(python: Mapping[str, object] | None) -> str | None:
    """The reply's ``python`` member, untrusted JSON: a version of integers, an executable path."""
    if not python:
        return None
    version = python.get("version")
    if version is not None and (not isinstance(version, list)
                                or not all(isinstance(v, int) and not isinstance(v, bool) for v in version)):
        return f"'python.version' is {version!r}, not a list of integers"
    return _wrong("'python.executable'", python.get("executable"), _STR_OR_NONE)


def _fatal_problem(fatal: Mapping[str, object] | None) -> str | None:
    if not fatal:
        return None
    return _wrong("'fatal.type'", fatal.get("type"), _STR_OR_NONE) or _wrong(
        "'fatal.version'", fatal.get("version"), _STR_OR_NONE)


def decode(frame: bytes) -> Reply:
    """One frame's body as a checked reply; ProtocolError says why it is none."""
    try:
        # The probe caps what it parses at MAX_JSON_DEPTH, but a reply is still untrusted text:
        # json's recursive decoder must not meet a nesting that exhausts the stack here.
        reply = json.loads(frame.decode("utf-8"))
    except RecursionError:
        raise ProtocolError("the probe's reply nests too deeply to be read", hint=NOISE_HINT) from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError alike
        raise ProtocolError(f"the probe's reply is not valid JSON: {exc}", hint=NOISE_HINT) from exc
    problem = reply_problem(reply)
    if problem is None:
        return cast("Reply", reply)  # every member's type was checked just above
    if problem.startswith("the remote probe speaks protocol"):
        raise ProtocolError(problem, hint="# use the same introspect version on both sides")
    raise ProtocolError(f"the probe's reply is damaged: {problem}", hint=NOISE_HINT)


def bodies(stdout: bytes) -> list[bytes]:
    """The body of every complete frame on ``stdout``, in order.

    A BEGIN marker with no END before the next BEGIN (noise, or a frame cut short) opens no
    frame: the body starts after the last BEGIN before its END.
    """
    found: list[bytes] = []
    start = stdout.find(BEGIN)
    while start >= 0:
        end = stdout.find(END, start + len(BEGIN) - 1)
        if end < 0:
            break
        begin = stdout.rfind(BEGIN, start, end + 1)  # markers may share their newline
        found.append(stdout[begin + len(BEGIN):end])
        start = stdout.find(BEGIN, end + len(END) - 1)  # END's closing newline may open the next BEGIN
    return found


def valid_frames(stdout: bytes) -> list[Reply]:
    """Every complete frame that reads as a reply, in order; when frames came and none is
    valid, the ProtocolError of the last one (a lone damaged reply is still named)."""
    frames: list[Reply] = []
    problem: ProtocolError | None = None
    for body in bodies(stdout):
        try:
            frames.append(decode(body))
        except ProtocolError as exc:
            problem = exc
    if not frames and problem is not None:
        raise problem
    return frames


def truncated_after(stdout: bytes) -> bool:
    """Whether a frame was begun after the last complete one and never ended (a cut reply)."""
    last_end = stdout.rfind(END)
    return stdout.find(BEGIN, last_end + len(END) - 1 if last_end >= 0 else 0) >= 0
