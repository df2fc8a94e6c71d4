"""tokenizer.json is summarised on the host, so a real-sized one (Gemma-3's is ~33 MB) is read
even though it is above the 16 MiB cap for JSON that travels; above 64 MiB it is refused."""

from __future__ import annotations

import json

from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files


def _write(path, entries: int, pad: int) -> None:
    vocab = {f"tok{i:07d}{'x' * pad}": i for i in range(entries)}
    path.write_text(json.dumps({"version": "1.0", "added_tokens": [],
                                "model": {"type": "BPE", "vocab": vocab, "merges": []}}))


def test_20_mib_tokenizer_json_is_summarised(tmp_path):
    _write(tmp_path / "tokenizer.json", 400_000, 40)
    assert (tmp_path / "tokenizer.json").stat().st_size > 16 * 1024 * 1024
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=16 * 1024 * 1024)
    assert facts["tokenizer_json"]["vocab_size"] == 400_000
    assert not [e for e in errors if e.get("type") == "too-large"]


def test_tokenizer_json_above_its_own_cap_is_refused(tmp_path):
    with open(tmp_path / "tokenizer.json", "wb") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: never read
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=16 * 1024 * 1024)
    assert [e["type"] for e in errors if e.get("path", "").endswith("tokenizer.json")] == ["too-large"]
