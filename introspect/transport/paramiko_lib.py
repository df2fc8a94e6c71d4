"""paramiko, imported without invoke; invoke handed to it only when an ssh_config runs ``Match exec``.

paramiko >= 4 requires invoke, and ``paramiko/config.py`` imports it as soon as paramiko is
imported, though it uses it only to run an ssh_config's ``Match exec`` command (upstream
kept it that way: https://github.com/paramiko/paramiko/pull/2543). invoke in turn imports
unittest.mock, asyncio and a vendored yaml: about 70 ms of every start-up, for a directive
few configs have. So paramiko is imported here with ``import invoke`` failing (a ``None``
entry in ``sys.modules``, the import system's "not importable" mark, removed right after),
which paramiko takes for "invoke is absent", as it does on paramiko 3, where invoke is
optional. :func:`enable_match_exec` gives paramiko the real invoke when a lookup needs it.

Every module of introspect that needs paramiko imports it from here (``from
introspect.transport.paramiko_lib import paramiko``), so whichever comes first, the
hiding applies. If paramiko was already imported (a program using the API did it), it
is left as it is.
"""

from __future__ import annotations

import sys
import threading

_HIDE = "invoke" not in sys.modules and "paramiko" not in sys.modules
if _HIDE:
    sys.modules["invoke"] = None  # type: ignore[assignment]  # `import invoke` -> ImportError
try:
    import paramiko
    import paramiko.config
finally:
    if _HIDE and "invoke" in sys.modules and sys.modules["invoke"] is None:
        del sys.modules["invoke"]

_lock = threading.Lock()


def enable_match_exec() -> bool:
    """Import invoke and give it to paramiko's ssh_config code; False when invoke is not installed."""
    with _lock:
        if getattr(paramiko.config, "invoke", None) is not None:
            return True
        try:
            import invoke
        except ImportError:
            return False
        # paramiko's Match-exec code reads its module global ``invoke`` at lookup time
        # (paramiko/config.py, SSHConfig._does_match).
        paramiko.config.invoke = invoke  # type: ignore[attr-defined]
        return True


__all__ = ["enable_match_exec", "paramiko"]
