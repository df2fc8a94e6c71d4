"""The items of a fleet probe held compressed until they are printed: bounded memory per host.

A profile as Python objects is about 0.35 MB (measured by ``scripts/bench --fleet``: 350 MB at 1,000
hosts, 861 MB at 3,000, all held until the document printed). Each finished host's item is kept as
its JSON text compressed (a few kB: one host's profile repeats the others' keys) and read back one at
a time by whoever walks the items: the printed document (:mod:`introspect.cli.json_stream` writes it
host by host), the table, the notices. The items come back equal to what was put in, as JSON reads
them (tuples as lists, keys as strings), which is what the printed document held anyway.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from typing import overload

from introspect.client.fleet_items import FleetItem

# zlib level 1: most of the size gain (JSON of one schema repeats itself) for the least CPU.
_LEVEL = 1


class ItemSpool(Sequence[FleetItem]):
    """Items in input order, each stored as compressed JSON; reading one decompresses it."""

    def __init__(self, size: int) -> None:
        self._blobs: list[bytes | None] = [None] * size

    def put(self, index: int, item: FleetItem) -> None:
        # default=str and NaN allowed, as documents.dumps treats them when the item is printed.
        self._blobs[index] = zlib.compress(json.dumps(item, default=str, separators=(",", ":")).encode(), _LEVEL)

    def filled(self, index: int) -> bool:
        return self._blobs[index] is not None

    def stored_bytes(self) -> int:
        return sum(len(blob) for blob in self._blobs if blob is not None)

    def __len__(self) -> int:
        return len(self._blobs)

    @overload
    def __getitem__(self, index: int) -> FleetItem: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[FleetItem]: ...

    def __getitem__(self, index: int | slice) -> FleetItem | Sequence[FleetItem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        blob = self._blobs[index]
        if blob is None:
            raise LookupError(f"item {index} was never stored")  # a bug in the caller
        item: FleetItem = json.loads(zlib.decompress(blob))
        return item

    def __iter__(self) -> Iterator[FleetItem]:
        return (self[i] for i in range(len(self)))


__all__ = ["ItemSpool"]
