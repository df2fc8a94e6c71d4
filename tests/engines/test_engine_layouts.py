"""Engine source layouts other than the pinned versions': older and odd spellings.

Written as small source trees in the layouts those releases use (the files are
read, never imported): SGLang models with ``EntryClass = X`` / ``+=``, an older
vLLM with a ``QUANTIZATION_METHODS`` dict, a Python 3.8-style ``Literal``.
"""

from __future__ import annotations

import time
from pathlib import Path

from introspect.remote.facts.host import engines as engine_facts


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sglang_entry_class_spellings(tmp_path: Path) -> None:
    _write(tmp_path, "srt/models/one.py", "import torch\nclass A: pass\nEntryClass = A\n")
    _write(tmp_path, "srt/models/many.py", "class B: pass\nclass C: pass\nEntryClass = [B]\nEntryClass += [C]\n")
    _write(tmp_path, "srt/models/none.py", "class D: pass\n")
    _write(tmp_path, "srt/models/broken.py", "EntryClass = [E\n")  # a syntax error costs this file only
    _write(tmp_path, "srt/models/pkg/__init__.py", "EntryClass = [F]\n")  # packages are not scanned
    fact, notes = engine_facts.sglang_architectures(str(tmp_path), time.time() + 10)
    assert fact is not None and notes == []
    assert fact["classes"] == {"A": {"module": "sglang.srt.models.one", "file": "srt/models/one.py"},
                               "B": {"module": "sglang.srt.models.many", "file": "srt/models/many.py"},
                               "C": {"module": "sglang.srt.models.many", "file": "srt/models/many.py"}}


def test_old_vllm_quantization_dict(tmp_path: Path) -> None:
    _write(tmp_path, "model_executor/layers/quantization/__init__.py",
           "from typing import Dict, Type\nQUANTIZATION_METHODS: Dict[str, Type] = {\n"
           '    "awq": AWQConfig,\n    "fp8": Fp8Config,\n    "compressed-tensors": CompressedTensorsConfig,\n}\n')
    fact, notes = engine_facts.vllm_quantization(str(tmp_path))
    assert fact == {"source": "model_executor/layers/quantization/__init__.py",
                    "methods": ["awq", "fp8", "compressed-tensors"], "conditional": {}}
    assert notes == []


def test_literal_following_names(tmp_path: Path) -> None:
    _write(tmp_path, "config/speculative.py",
           'from typing import Literal\nMTP = Literal["deepseek_mtp", "mtp"]\nEagle = Literal["eagle", "eagle3", MTP]\n'
           'SpeculativeMethod = Literal["ngram", Eagle, "ngram"]\n')
    fact, _ = engine_facts.vllm_speculative(str(tmp_path))
    assert fact is not None and fact["algorithms"] == ["ngram", "eagle", "eagle3", "deepseek_mtp", "mtp"]


def test_missing_files_are_notes(tmp_path: Path) -> None:
    assert engine_facts.vllm_architectures(str(tmp_path)) == (
        None, ["architectures: cannot read model_executor/models/registry.py"])
    assert engine_facts.sglang_speculative(str(tmp_path))[1] == [
        "speculative: no SpeculativeAlgorithm enum in srt/speculative/spec_info.py"]
