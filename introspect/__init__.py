"""introspect: remote model introspection over SSH.

Layers, imported one way: ``cli`` -> ``checks`` -> ``analysis`` (pure, no I/O);
``transport`` runs the standard-library probes of ``remote`` on a host and never
imports ``analysis``. See README.md and docs/raw-facts.md.

The public Python API (:mod:`introspect.api`), loaded on first use so that
``import introspect`` stays cheap::

    from introspect import SSH, diff, health, models, plan, preflight, probe

and the same calls as coroutines in :mod:`introspect.aio`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["SSH", "__version__", "diff", "health", "models", "plan", "preflight", "probe"]

if TYPE_CHECKING:  # pyproject's mypy overrides keep the remote side's 3.8 check out of the API
    from introspect.api import SSH, diff, health, models, plan, preflight, probe


def __getattr__(name: str) -> Any:
    if name in ("SSH", "diff", "health", "models", "plan", "preflight", "probe"):
        from introspect import api

        return getattr(api, name)
    raise AttributeError(f"module 'introspect' has no attribute {name!r}")
