"""The profile's small sections read straight off the raw facts: ``target``, ``environment``, ``files``. Pure.

Each is its document record (introspect/documents/profile_files.py); a value the record
cannot hold (damaged raw facts) makes the caller's guard leave that section empty with a
``raw-damaged`` finding (analysis/raw_guard.py).
"""

from __future__ import annotations

from introspect.analysis.list_caps import totals_of
from introspect.analysis.result import TargetSection
from introspect.documents.profile_files import Environment, Files
from introspect.remote.contract import (
    ErrorRecord,
    FilesFacts,
    JSONObject,
    RawFacts,
    TargetBlock,
    as_dict,
    as_list,
)

# The keys of a custom-code entry the profile keeps, in its order.
CUSTOM_CODE_KEYS = ("file", "module", "sha256", "size", "imports", "relative_imports", "referenced_by", "error")


def target_section(block: TargetBlock | None) -> TargetSection:
    """The raw target block with every key present, in the profile's order (raw_guard checked the types)."""
    block = block or TargetBlock()
    section = TargetSection(scheme=block.get("scheme"), host=block.get("host"), port=block.get("port"),
                            user=block.get("user"), python=block.get("python"), venv=block.get("venv"),
                            model_path=block.get("model_path"))
    container = block.get("container")
    if container:
        section["container"] = container
    return section


def environment_section(raw: RawFacts) -> Environment:
    """The target's Python and the packages the model's code imports, as the probe read them."""
    env = as_dict(raw.get("environment"))
    python = as_dict(raw.get("python"))
    version = env.get("python_version")
    if version is None and python.get("version"):
        version = ".".join(str(part) for part in python["version"])
    return Environment(
        python_version=version,
        python_executable=env.get("python_executable") or python.get("executable"),
        venv=as_dict(raw.get("target")).get("venv"),
        in_venv=env.get("in_venv"),
        packages=dict(as_dict(env.get("packages"))),
        missing_modules=list(env.get("missing_modules") or []),
        custom_code_modules=as_dict(env.get("modules")),
    )


def config_error(errors: list[ErrorRecord] | None) -> ErrorRecord | None:
    """The probe's record of a config.json that is there but unusable (missing is not one)."""
    for err in errors or []:
        path = err.get("path")
        if isinstance(path, str) and path.endswith("/config.json") and err.get("type") not in (
                "missing-config", "not-found", "encoding"):
            return err
    return None


def _custom_code(files: JSONObject) -> list[JSONObject]:
    return [{key: module.get(key) for key in CUSTOM_CODE_KEYS}
            for module in as_list(files.get("custom_code")) if isinstance(module, dict)]


def files_section(raw: RawFacts, files: FilesFacts | None) -> Files:
    """The model directory as read; the raw values are checked by the record."""
    facts = as_dict(files)
    listing = totals_of(facts, "listing")  # the listing's true length, and whether it was cut (MAX_LISTING)
    hashes = raw.get("hashes")
    return Files.model_validate({
        "model_path": facts.get("model_path"),
        "real_path": facts.get("real_path"),
        "status": facts.get("status"),
        "listing": facts.get("listing") or [],
        "listing_total": listing.total,
        "listing_truncated": listing.truncated,
        "total_size": facts.get("total_size"),  # of the listed entries only
        "custom_code": _custom_code(facts),
        "safetensors_bytes_read": as_dict(raw.get("safetensors")).get("bytes_read"),
        "hashes": dict(hashes) if isinstance(hashes, dict) else None,
    })
