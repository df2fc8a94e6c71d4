"""Import, in a thread, modules that a run needs only once the remote side has answered.

While a probe's channels run, the controller's threads mostly wait on the network, so
the profile's modules can load meanwhile instead of after the reply. The caller still
imports them where they are used: that import returns at once when this one finished,
and waits for it (the module's import lock) when it is still running.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading


@functools.cache  # once per module and process: a fleet's per-host calls start one thread
def preload(module: str) -> None:
    # Not a daemon: an exit during the import waits the few ms it takes instead of stopping
    # it halfway. A failing import is left to the caller's own import to report.
    threading.Thread(target=_import, args=(module,), name=f"preload {module}").start()


def _import(module: str) -> None:
    with contextlib.suppress(Exception):
        importlib.import_module(module)
