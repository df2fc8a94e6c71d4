"""The native load reads what the real tokenizer reads, on real files from registry packages.

The files are tests/data/tokenizers/ (see its README: tortoise-tts' tokenizer.json,
openai-whisper's gpt2.tiktoken and tokenizer.py, dashscope's qwen.tiktoken and Qwen's
tokenizer module). Truth comes from the real code: transformers' AutoTokenizer in this
venv, dashscope's ``QwenTokenizer`` and whisper's ``get_encoding``, imported from the
copied modules; the native load reads the same files statically.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import lzma
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.tokenizer.tokenizer_fallback import TOKENIZER_JSON_CLASS_SOURCE, facts_from_files
from introspect.remote.facts.tokenizer import tokenizer_native_load
from introspect.remote.facts.tokenizer.static_specials import scan_specials
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from introspect.remote.facts.tokenizer.tokenizer_native_load import PARTIAL_COUNTS, load_native
from tests.tokenizer.conftest import ProbeRunner

DATA = Path(__file__).resolve().parents[1] / "data" / "tokenizers"
WHISPER_RANKS = 50256  # lines of whisper/assets/gpt2.tiktoken
QWEN_RANKS = 151643  # lines of dashscope/resources/qwen.tiktoken


def _unpack(name: str, dest: Path) -> None:
    dest.write_bytes(lzma.decompress((DATA / name).read_bytes()))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("native-truth")
    out = {name: root / name for name in ("json-and-tiktoken", "json-only", "qwen", "qwen-auto-map", "whisper")}
    for path in out.values():
        path.mkdir()
    for name in ("json-and-tiktoken", "json-only"):
        shutil.copyfile(DATA / "tortoise-tts" / "tokenizer.json", out[name] / "tokenizer.json")
    # Meta's layout: the ranks as a tiktoken-text tokenizer.model, here beside a tokenizer.json.
    _unpack("openai-whisper/gpt2.tiktoken.xz", out["json-and-tiktoken"] / "tokenizer.model")
    for name in ("qwen", "qwen-auto-map"):
        _unpack("dashscope/qwen.tiktoken.xz", out[name] / "qwen.tiktoken")
        for module in ("qwen_tokenizer.py", "tokenizer_base.py"):
            shutil.copyfile(DATA / "dashscope" / f"{module}.txt", out[name] / module)
    (out["qwen-auto-map"] / "tokenizer_config.json").write_text(json.dumps(
        {"auto_map": {"AutoTokenizer": ["qwen_tokenizer.QwenTokenizer", None]}}))
    _unpack("openai-whisper/gpt2.tiktoken.xz", out["whisper"] / "gpt2.tiktoken")
    shutil.copyfile(DATA / "openai-whisper" / "tokenizer.py.txt", out["whisper"] / "tokenizer.py")
    return out


@pytest.fixture(scope="module")
def auto_tokenizer() -> Callable[[Path], Any]:
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    return lambda path: AutoTokenizer.from_pretrained(str(path))


def _loaded_specials(tok: Any) -> list[dict[str, Any]]:
    return sorted(({"token": str(t.content), "id": int(i)} for i, t in tok.added_tokens_decoder.items()
                   if t.special), key=lambda t: t["id"])


def test_tokenizer_json_wins_over_a_tiktoken_model_as_in_transformers(
    dirs: dict[str, Path], auto_tokenizer: Callable[[Path], Any]
) -> None:
    model = dirs["json-and-tiktoken"]
    real = auto_tokenizer(model)
    native = load_native(str(model))
    assert native is not None
    assert (native["source"], native["read"], native["partial"]) == ("tokenizers", ["tokenizer.json"], [])
    assert (native["vocab_size"], native["len"]) == (real.vocab_size, len(real))
    assert native["special_tokens"] == _loaded_specials(real) == [
        {"token": "[STOP]", "id": 0}, {"token": "[UNK]", "id": 1}, {"token": "[SPACE]", "id": 2}]
    assert (native["special_tokens_total"], native["special_tokens_truncated"]) == (3, False)
    # The files fallback reads the same file and names the same class.
    files, errors = collect_tokenizer_files(str(model))
    assert errors == []
    facts = facts_from_files(files)
    assert (facts["class"], facts["vocab_size"], facts["len"]) == (type(real).__name__, real.vocab_size, len(real))


def test_without_the_tokenizers_library_the_tiktoken_model_is_not_loaded_instead(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    assert load_native(str(dirs["json-and-tiktoken"])) is None  # the files fallback (tokenizer.json) stands


def test_probe_in_a_venv_without_transformers_loads_tokenizer_json(
    dirs: dict[str, Path], venv_without: Callable[[str], Path], probe: ProbeRunner,
    auto_tokenizer: Callable[[Path], Any],
) -> None:
    model = dirs["json-and-tiktoken"]
    result = probe(venv_without("transformers"), model, sample=False)
    assert result["transformers_error"]["missing_packages"] == ["transformers"]
    real = auto_tokenizer(model)
    assert (result["loaded"], result["source"], result["class"], result["read"]) == (
        True, "tokenizers", "Tokenizer", ["tokenizer.json"])
    assert (result["vocab_size"], result["len"], result["special_tokens"]) == (
        real.vocab_size, len(real), _loaded_specials(real))


def test_a_tokenizer_json_only_dir_names_the_class_autotokenizer_loads(
    dirs: dict[str, Path], auto_tokenizer: Callable[[Path], Any]
) -> None:
    files, errors = collect_tokenizer_files(str(dirs["json-only"]))
    assert errors == [] and files["vocab_choice"] is None
    facts = facts_from_files(files)
    assert facts["class"] == type(auto_tokenizer(dirs["json-only"])).__name__ == "TokenizersBackend"
    assert facts["vocab"]["class_source"] == TOKENIZER_JSON_CLASS_SOURCE


@pytest.fixture(scope="module")
def qwen_truth(dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """n_vocab and the specials of dashscope's real QwenTokenizer over the copied files."""
    pytest.importorskip("tiktoken")
    model = dirs["qwen"]
    real = _import_qwen(model, tmp_path_factory.mktemp("qwen-truth"))(str(model / "qwen.tiktoken"))
    by_id = sorted(real._special_tokens.items(), key=lambda kv: kv[1])
    return {"n_vocab": real._tokenizer.n_vocab, "specials": [{"token": t, "id": i} for t, i in by_id]}


def _import_qwen(model: Path, tmp_path: Path) -> Any:
    """dashscope's real QwenTokenizer class, from the copied modules (a package of their own)."""
    package = tmp_path / "ds_qwen_truth"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module in ("qwen_tokenizer.py", "tokenizer_base.py"):
        shutil.copyfile(model / module, package / module)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("ds_qwen_truth.qwen_tokenizer").QwenTokenizer
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("ds_qwen_truth")]:
            del sys.modules[name]


@pytest.mark.parametrize("layout", ["qwen", "qwen-auto-map"])
def test_specials_defined_in_code_are_counted(layout: str, dirs: dict[str, Path], qwen_truth: dict[str, Any]) -> None:
    """With no config (as the package ships it) and named by an auto_map: the same table."""
    native = load_native(str(dirs[layout]))
    assert native is not None and native["partial"] == []
    assert native["len"] == native["vocab_size"] == qwen_truth["n_vocab"] == QWEN_RANKS + 208
    assert native["special_tokens"] == qwen_truth["specials"]
    assert native["read"][:2] == ["qwen.tiktoken", "qwen_tokenizer.py"]


def test_specials_the_code_computes_unreadably_are_partial(dirs: dict[str, Path]) -> None:
    pytest.importorskip("tiktoken")
    model = dirs["whisper"]
    spec = importlib.util.spec_from_file_location("whisper_tokenizer_truth", model / "tokenizer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assets = model.parent / "whisper-assets" / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model / "gpt2.tiktoken", assets / "gpt2.tiktoken")
    module.__file__ = str(assets.parent / "tokenizer.py")  # get_encoding reads assets/ beside itself
    real = module.get_encoding("gpt2")
    native = load_native(str(model))
    assert native is not None
    assert native["partial"] == PARTIAL_COUNTS
    # Stated for the ranks only, and flagged: the real encoding has 1,608 more ids.
    assert native["len"] == WHISPER_RANKS and real.n_vocab == WHISPER_RANKS + 1608
    assert native["special_tokens"] == [] and native["read"] == ["gpt2.tiktoken", "tokenizer.py"]


def test_the_static_reader_names_what_it_cannot_resolve(dirs: dict[str, Path]) -> None:
    facts, errors = scan_specials(str(dirs["whisper"]), "tokenizer.py", None, 1 << 20, with_unresolved=True)
    assert errors == [] and facts["special_token_ids"] == {} and facts["named_specials"] is None
    assert "tokenizer.py:" in facts["unresolved"][0]
    qwen, _ = scan_specials(str(dirs["qwen"]), "qwen_tokenizer.py", "QwenTokenizer", 1 << 20)
    ids = qwen["special_token_ids"]
    assert (len(ids), ids["<|endoftext|>"], ids["<|extra_204|>"]) == (208, QWEN_RANKS, QWEN_RANKS + 207)


def test_a_capped_special_list_carries_its_total_and_a_flag(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokenizer_native_load, "MAX_SPECIALS", 2)
    native = load_native(str(dirs["json-and-tiktoken"]))
    assert native is not None
    assert [t["id"] for t in native["special_tokens"]] == [0, 1]
    assert (native["special_tokens_total"], native["special_tokens_truncated"]) == (3, True)
