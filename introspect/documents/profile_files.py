"""The profile's ``target``, ``environment`` and ``files`` sections (introspect/analysis/profile.py)."""

from __future__ import annotations

from introspect.documents.base import Record


class Target(Record):
    """Where the profile was taken; ``container`` only where the transport reached one."""

    scheme: str | None
    host: str | None
    port: int | None
    user: str | None
    python: str | None
    venv: str | None
    model_path: str | None
    container: str | None = None


class ModuleSource(Record):
    """Where an import of remote code would come from (remote/facts/host/environment.py)."""

    available: bool
    distribution: str | None = None
    distribution_source: str | None = None


class Environment(Record):
    python_version: str | None
    python_executable: str | None
    venv: str | None
    in_venv: bool | None
    packages: dict[str, str | None]  # distribution -> version (null: not installed)
    missing_modules: list[str]
    custom_code_modules: dict[str, ModuleSource]


class ListingEntry(Record):
    """One entry of the model directory; ``kind``/``link``/``resolved``/``link_error`` where the
    remote side reports links (remote/facts/model/listing.py)."""

    name: str
    kind: str | None = None
    size: int | None
    link: str | None = None
    resolved: str | None = None
    link_error: str | None = None


class ShortError(Record):
    type: str
    message: str


class CustomCode(Record):
    """A ``*.py`` file of the model directory, what it imports and what references it."""

    file: str
    module: str
    sha256: str | None
    size: int | None
    imports: list[str]
    relative_imports: list[str]
    referenced_by: list[str]
    error: ShortError | None


class HashedFile(Record):
    sha256: str | None
    size: int | None


class SkippedFile(Record):
    name: str
    size: int | None
    reason: str


class IndexHash(Record):
    file: str
    sha256: str | None
    total_size: int | None


class WeightsHashes(Record):
    index: IndexHash | None
    shards: dict[str, int | None]  # shard file -> size
    missing_shards: list[str]


class Hashes(Record):
    files: dict[str, HashedFile]  # file name -> hash
    skipped: list[SkippedFile]
    weights: WeightsHashes
    truncated: bool


class Files(Record):
    model_path: str | None
    real_path: str | None
    status: str | None
    listing: list[ListingEntry]
    listing_total: int
    listing_truncated: bool
    total_size: int | None
    custom_code: list[CustomCode]
    safetensors_bytes_read: int | None
    hashes: Hashes | None


__all__ = ["CustomCode", "Environment", "Files", "Hashes", "ListingEntry", "ModuleSource", "Target"]
