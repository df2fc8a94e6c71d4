"""paramiko, imported without invoke; invoke handed to it only when an ssh_config runs ``Match exec``.

paramiko >= 4 requires invoke, and ``paramiko/config.py`` imports it as soon as paramiko is
imported, though it uses it only to run an ssh_config's ``Match exec`` command (upstream
kept it that way: https://github.com/paramiko/paramiko/pull/2543). invoke in turn imports
unittest.mock, asyncio and a vendored yaml: about 70 ms of every start-up, for a directive
few configs have. So paramiko is imported here with ``import invoke`` failing (a ``None``
entry in ``sys.modules``, the import system's "not importable" mark, removed right after),
which paramiko takes for "invoke is absent", as it does on paramiko 3, where invoke is
optional. :func:`enable_match_exec` gives paramiko the real invoke when a lookup needs it.

paramiko also reads its own version with ``importlib.metadata.version("paramiko")`` when
imported (``paramiko/__init__.py``: ``__version__ = metadata.version("paramiko")``): importing
importlib.metadata (email, zipfile, ...) and scanning every path entry's distributions, ~35 ms
measured here, for one string. Nothing else on the health path imports importlib.metadata, so
while paramiko is imported, :class:`_OwnVersion` stands in for it and reads the version from
the METADATA of paramiko's own ``.dist-info`` beside the package; any other question, or no
such file, goes to the real importlib.metadata.

Every module of introspect that needs paramiko imports it from here (``from
introspect.transport.paramiko_lib import paramiko``), so whichever comes first, the
hiding applies. If paramiko was already imported (a program using the API did it), it
is left as it is.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any

_METADATA = "importlib.metadata"


class _OwnVersion(types.ModuleType):
    """Stands in for importlib.metadata while paramiko is imported: ``version("paramiko")`` read
    from ``paramiko-<version>.dist-info/METADATA`` next to the package, anything else from the
    real module."""

    def __init__(self) -> None:
        super().__init__(_METADATA)

    def version(self, name: str) -> str:
        found = _dist_info_version(name) if name == "paramiko" else None
        return found if found is not None else self._real().version(name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._real(), attr)

    def _real(self) -> types.ModuleType:
        if sys.modules.get(_METADATA) is self:
            del sys.modules[_METADATA]
        import importlib.metadata

        return importlib.metadata


def _dist_info_version(name: str) -> str | None:
    """The ``Version:`` of ``name``'s one ``.dist-info`` beside its package, or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            return None
        site = os.path.dirname(os.path.dirname(spec.origin))
        infos = [e for e in os.listdir(site) if e.startswith(name + "-") and e.endswith(".dist-info")]
        if len(infos) != 1:
            return None  # none, or several installs' leftovers: let importlib.metadata choose
        with open(os.path.join(site, infos[0], "METADATA"), encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    return None  # end of the headers
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
    except (OSError, ValueError, ImportError):
        return None
    return None


_HIDE = "invoke" not in sys.modules and "paramiko" not in sys.modules
_STAND_IN = _OwnVersion() if _HIDE and _METADATA not in sys.modules else None
if _HIDE:
    sys.modules["invoke"] = None  # type: ignore[assignment]  # `import invoke` -> ImportError
if _STAND_IN is not None:
    sys.modules[_METADATA] = _STAND_IN
try:
    import paramiko
    import paramiko.config
finally:
    if _HIDE and "invoke" in sys.modules and sys.modules["invoke"] is None:
        del sys.modules["invoke"]
    if _STAND_IN is not None and sys.modules.get(_METADATA) is _STAND_IN:
        del sys.modules[_METADATA]

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
