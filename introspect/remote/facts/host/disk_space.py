"""Preflight: free space where the job will write (the nearest existing parent of the output dir).

Runs on the host: standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ..paths import resolve_path


def check_disk(output_dir: Optional[str]) -> Dict[str, Any]:
    """Free space where the data will be written: the nearest existing parent of output_dir.

    ``{"output_dir", "defaulted", "checked_path", "exists", "writable", "free_bytes", "total_bytes"}``
    """
    defaulted = not output_dir
    target = resolve_path(output_dir) if output_dir else os.path.expanduser("~")
    checked = target
    # The output dir usually does not exist yet; its filesystem is its nearest parent's.
    while not os.path.exists(checked):
        parent = os.path.dirname(checked)
        if parent == checked:
            break
        checked = parent
    stat = os.statvfs(checked)
    return {"output_dir": target, "defaulted": defaulted, "checked_path": checked,
            "exists": os.path.isdir(target), "writable": os.access(checked, os.W_OK | os.X_OK),
            "free_bytes": stat.f_bavail * stat.f_frsize, "total_bytes": stat.f_blocks * stat.f_frsize}

