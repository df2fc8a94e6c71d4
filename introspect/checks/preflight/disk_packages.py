"""The ``disk-and-packages`` check: free space at the output dir and the pipeline's packages."""

from __future__ import annotations

import shlex

from introspect.checks.preflight.common import (
    GB,
    Check,
    Part,
    comment,
    fix_lines,
    no_evidence,
    section,
    worst,
)
from introspect.remote.contract import DiskFacts, ErrorRecord, PackagesFacts, PreflightReply, as_dict, as_list


def check_disk_and_packages(evidence: PreflightReply, min_free_gb: float, pip: str) -> Check:
    disk, derr = section(evidence.get("disk"))
    packages, perr = section(evidence.get("packages"))
    if disk is None and packages is None:
        return no_evidence("disk-and-packages", evidence, "disk and packages", derr or perr)
    parts = [_disk_part(disk, derr, min_free_gb), _packages_part(packages, perr, pip)]
    out = {"disk": parts[0][3], "packages": parts[1][3], "min_free_gb": min_free_gb}
    status = worst(p[0] for p in parts)
    fixes = [p[2] for p in parts if p[2] and p[0] != "pass"]
    return Check("disk-and-packages", status, out, fix_lines(*fixes), "; ".join(p[1] for p in parts))


def _disk_part(disk: DiskFacts | None, err: ErrorRecord | None, min_free_gb: float) -> Part:
    if disk is None:
        message = f"disk not checked: {as_dict(err).get('message') or 'no evidence'}"
        return "fail", message, comment("check --output-dir: it must be a path on the host"), {"error": err}
    free = disk.get("free_bytes")
    free_gb = round(free / GB, 1) if isinstance(free, int) else None
    where = disk.get("checked_path")
    note = " (no --output-dir: checked the home directory)" if disk.get("defaulted") else ""
    out = dict(disk, free_gb=free_gb)
    if not disk.get("writable"):
        return ("fail", f"{where} is not writable{note}",
                fix_lines(f"ls -ld {shlex.quote(str(where))}  # make it writable for the pipeline's user",
                          comment("or pass an --output-dir it can write to")), out)
    if free_gb is None or free_gb < min_free_gb:
        return ("fail", f"{free_gb} GB free at {where}, below --min-free-gb {min_free_gb:g}{note}",
                fix_lines(f"df -h {shlex.quote(str(where))}  # free {min_free_gb - (free_gb or 0):.1f} GB there",
                          comment("or pass --output-dir on a larger filesystem")), out)
    return "pass", f"{free_gb} GB free at {where} (>= {min_free_gb:g}){note}", None, out


def _packages_part(packages: PackagesFacts | None, err: ErrorRecord | None, pip: str) -> Part:
    if packages is None:
        return "fail", f"packages not checked: {as_dict(err).get('message') or 'no evidence'}", None, {"error": err}
    items = [as_dict(i) for i in as_list(packages.get("items"))]
    missing = [str(m) for m in as_list(packages.get("missing"))]
    out = {"python": packages.get("python"), "items": items, "missing": missing,
           "tokenizer_code": packages.get("tokenizer_code")}
    if missing:
        who = ", ".join(f"{i.get('name')} ({i.get('required_by')})" for i in items if not i.get("available"))
        return ("fail", f"missing in the venv: {who}", f"{pip} install " + " ".join(shlex.quote(m) for m in missing),
                out)
    shown = ", ".join(f"{i.get('name')} {i.get('version') or ''}".strip() for i in items)
    return "pass", f"packages present: {shown}", None, out
