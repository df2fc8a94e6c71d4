"""Paths as the user means them on the host.

Runs on the host: standard library only, Python 3.8+.
"""

from __future__ import annotations

import os


def resolve_path(path: str) -> str:
    """``~`` expanded; a relative path taken from the login directory."""
    # Isolated tasks run with a private temp dir as cwd: a relative path means the
    # login directory, as it would in an interactive ssh session.
    path = os.path.expanduser(path)
    if path and not os.path.isabs(path):
        path = os.path.join(os.path.expanduser("~"), path)
    return path

