"""What an executor is pointed at, as plain typed data (the profile's ``target`` block).

Every executor exposes one ``Target``: the URL scheme it was reached by, the
host (the machine that runs the container, for container schemes), port and
user where they apply, the container/pod/VM inside it, and the label used in
error messages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    label: str = "local"
    container: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
