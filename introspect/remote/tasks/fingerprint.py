"""Remote task "fingerprint": the digest a cached profile is checked against (see facts.fingerprint).

Standard library only, Python 3.8+. Request ``{"model_path"}``, reply
:class:`~introspect.remote.contract.Fingerprint`.
"""

from __future__ import annotations

from typing import Any, Dict

from ..contract import Fingerprint
from ..facts.model.fingerprint import compute


def run(request: Dict[str, Any]) -> Fingerprint:
    return compute(str(request["model_path"]))
