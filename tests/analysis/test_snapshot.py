"""The snapshot-remote-code finding: made by the pure aggregator, so a saved raw keeps it."""

from __future__ import annotations

from typing import Any

from introspect.analysis.profile import build_profile
from introspect.analysis.snapshot import snapshot_remote_code_finding
from tests.models import NEW_COMMIT

SNAPSHOT = "/root/.cache/huggingface/hub/models--moonshotai--Kimi-K2.6/snapshots/" + NEW_COMMIT
BLOB_MISSING = ("[Errno 2] No such file or directory: '/root/.cache/huggingface/hub/models--moonshotai"
                "--Kimi-K2.6/blobs/tool_declaration_ts.py'")


def _snapshot_raw(message: str) -> dict[str, Any]:
    return {
        "target": {"model_path": SNAPSHOT},
        "files": {"model_path": SNAPSHOT, "listing": [
            {"name": "tokenization_kimi.py", "resolved": "/root/.cache/huggingface/hub/models--moonshotai--"
                                                         "Kimi-K2.6/blobs/ab12"}],
                  "custom_code": [{"file": "tokenization_kimi.py", "relative_imports": [".tool_declaration_ts"]}]},
        "tokenizer_probe": {"loaded": False, "transformers_version": "5.10.0",
                            "error": {"type": "FileNotFoundError", "message": message, "traceback": []}},
    }


def test_snapshot_remote_code_finding() -> None:
    found = snapshot_remote_code_finding(_snapshot_raw(BLOB_MISSING))
    assert found is not None and found.code == "snapshot-remote-code" and found.severity.value == "error"
    assert "tool_declaration_ts" in found.message and found.fix is not None and "cp -rL" in found.fix
    assert snapshot_remote_code_finding(_snapshot_raw("No module named 'tiktoken'")) is None
    plain = _snapshot_raw("blobs/tool_declaration_ts.py missing")
    plain["files"]["model_path"] = "/root/models/Kimi-K2.6"
    assert snapshot_remote_code_finding(plain) is None
    assert snapshot_remote_code_finding({}) is None


def test_blobs_in_the_error_alone_is_enough() -> None:
    raw = _snapshot_raw("could not import a module from blobs/ab12")
    raw["files"]["custom_code"] = []
    found = snapshot_remote_code_finding(raw)
    assert found is not None and "its custom code" in found.message


def test_build_profile_has_the_snapshot_finding() -> None:
    """`introspect profile RAW.json` rebuilds the same findings as the probe that saved RAW."""
    profile = build_profile(_snapshot_raw(BLOB_MISSING))
    [snapshot] = [f for f in profile["findings"] if f["code"] == "snapshot-remote-code"]
    assert snapshot["severity"] == "error" and SNAPSHOT in snapshot["message"]
    assert f"cp -rL {SNAPSHOT} " in snapshot["fix"]
    severities = [f["severity"] for f in profile["findings"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)


def test_build_profile_without_the_snapshot_situation_has_none() -> None:
    plain = _snapshot_raw(BLOB_MISSING)
    plain["files"]["model_path"] = plain["target"]["model_path"] = "/root/models/Kimi-K2.6"
    assert not [f for f in build_profile(plain)["findings"] if f["code"] == "snapshot-remote-code"]
