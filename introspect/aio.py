"""The Python API as coroutines, for embedding introspect in an asyncio service.

Each call is the :mod:`introspect.api` call of the same name, run in a thread of one bounded
pool owned by this module, so the event loop never blocks on a connection or a probe and at
most ``MAX_WORKERS`` calls run at once (a service asking for more waits its turn; a fleet call
such as :func:`health` runs its own bounded pool of connections inside one worker).

Why a thread pool, not asyncio over the executors: the executors drive OpenSSH, container
clients and paramiko, all blocking, and their deadlines, signals and cleanup are tested as they
are; a second, asyncio implementation would be a second set of bugs. The cost is one thread
per running call.

Cancelling the awaiting task stops the waiting, not the work: the call runs to its own end,
bounded by its ``deadline=`` / ``timeout=`` arguments (the remote probes stop by their own
watchdogs when the connection closes). Pass a deadline that suits the service.

    >>> import asyncio
    >>> from introspect import aio
    >>> document = asyncio.run(aio.plan(PROFILE, gpus=8, gpu="H200", max_model_len=32768))
    >>> document.best
    'TP8'
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from introspect import api

MAX_WORKERS = 8
P = ParamSpec("P")
R = TypeVar("R")

_pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="introspect-aio")


def _in_pool(call: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``call`` as a coroutine function with the same parameters, run in the module's pool."""

    @functools.wraps(call)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_pool, functools.partial(call, *args, **kwargs))

    return run


probe = _in_pool(api.probe)
preflight = _in_pool(api.preflight)
health = _in_pool(api.health)
plan = _in_pool(api.plan)
diff = _in_pool(api.diff)
models = _in_pool(api.models)

__all__ = ["MAX_WORKERS", "diff", "health", "models", "plan", "preflight", "probe"]
