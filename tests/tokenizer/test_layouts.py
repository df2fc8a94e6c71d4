"""Every tokenizer layout: the files fallback equals the layout's own library, field by field.

The model dirs hold the real files PyPI packages ship (tests/fixtures/tokenizer_layouts.py:
mistral_common's sentencepiece and tekken files, llama-models' Meta Llama-3
``tokenizer.model`` and its ``Tokenizer`` class). Truth comes from sentencepiece,
mistral_common, tiktoken and llama_models, run in the pinned venv; the fallback runs the
tokenizer probe in a venv without transformers and rebuilds the facts from the files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from introspect.analysis.architecture.section import analyze_architecture
from introspect.analysis.diff.document import diff_tokenizer
from introspect.analysis.tokenizer.section import analyze_tokenizer
from introspect.remote.facts.model.files import collect_files
from introspect.remote.facts.tokenizer.sentencepiece_model import WireError, parse_model, summarize_model
from introspect.remote.facts.tokenizer.tekken import summarize_tekken
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.tokenizer_layouts import (
    LAYOUTS,
    NEMO_PARAMS,
    build_layout,
    tok_venv,
    with_pinned_packages,
)
from tests.fixtures.tokenizer_layouts import truth as run_truth
from tests.fixtures.venvs import make_venv
from tests.tokenizer.conftest import ProbeRunner

CAP = 1 << 26
NAMED = ("bos", "eos", "pad", "unk")
# A layout's truth is one interpreter of the pinned venv importing its library (mistral_common
# brings pydantic): asked once per layout dir, then shared by the tests that compare against it.
truth = functools.cache(run_truth)


@pytest.fixture(scope="session")
def pinned_venv() -> Path:
    return tok_venv()


@pytest.fixture(scope="session")
def venv_bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No transformers and no tiktoken: nothing on the host can load these tokenizers."""
    return make_venv(tmp_path_factory.mktemp("venvs") / "venv_bare", exclude={"transformers", "tiktoken"})


@pytest.fixture(scope="session")
def layout_dirs(pinned_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    return {name: build_layout(name, root / name, pinned_venv) for name in LAYOUTS}


def _fallback(model: Path, probe_result: dict[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    files, errors = collect_tokenizer_files(str(model), json_cap=CAP)
    assert errors == []
    return analyze_tokenizer(files, probe_result, config=None, target={"venv": "/v", "model_path": str(model)},
                             remote_code_allowed=True)


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fallback_equals_the_layouts_own_library(
    layout: str, layout_dirs: dict[str, Path], pinned_venv: Path, venv_bare: Path, probe: ProbeRunner
) -> None:
    model = layout_dirs[layout]
    expected = truth(layout, model, pinned_venv)
    result = probe(venv_bare, model, sample=False)
    assert result["loaded"] is False and result["error"]["missing_packages"] == ["transformers"]
    section, _ = _fallback(model, result)
    assert (section["loaded"], section["source"]) == (False, "files")
    assert section["class"] == expected["cls"]
    assert (section["vocab_size"], section["len"]) == (expected["vocab_size"], expected["len"])
    for attr in NAMED:
        assert section[attr] == expected[attr], attr
    assert section["special_tokens"] == expected["specials"]
    # None of these layouts ships a chat template: both sides have none.
    assert section["chat_template"]["sha256"] is None and not section["chat_template"]["present"]


NATIVE_SOURCE = {"sentencepiece-tokenizer.model": "sentencepiece", "sentencepiece-spiece.model": "sentencepiece",
                 "mistral-model.v3": "mistral_common", "mistral-native-tekken": "mistral_common",
                 "meta-original-tiktoken": "tiktoken", "tiktoken-specials-in-code": "tiktoken"}


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_without_transformers_the_layouts_library_loads_it(
    layout: str, layout_dirs: dict[str, Path], pinned_venv: Path, probe: ProbeRunner
) -> None:
    """The pinned venv has sentencepiece, mistral_common and tiktoken, no transformers."""
    model = layout_dirs[layout]
    result = probe(pinned_venv, model, sample=False)
    source = NATIVE_SOURCE[layout]
    # tiktoken-specials-in-code: the ranks plus the specials its class declares, read statically.
    assert result["loaded"] is True and result["source"] == source and result["partial"] == []
    assert result["transformers_error"]["missing_packages"] == ["transformers"]
    expected = truth(layout, model, pinned_venv)
    section, findings = _fallback(model, result)
    # The class's own code is read, never run: what loads is tiktoken's Encoding with its table.
    cls = "Encoding" if layout == "tiktoken-specials-in-code" else expected["cls"]
    assert (section["source"], section["class"]) == (source, cls)
    assert (section["vocab_size"], section["len"], section["special_tokens"]) == (
        expected["vocab_size"], expected["len"], expected["specials"])
    assert set(section["sources"].values()) <= {source, None}
    # No disagreement; an error all the same: AutoTokenizer, what a pipeline calls, fails there.
    assert [(f["severity"], f["code"]) for f in findings] == [("error", "tokenizer-loaded-without-transformers")]
    assert findings[0]["fix"] == section["autotokenizer"]["fix"] == "/v/bin/pip install transformers"


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["mistral-native-tekken", "meta-original-tiktoken"])
def test_where_transformers_loads_it_the_fallback_tells_the_same_story(
    layout: str, layout_dirs: dict[str, Path], pinned_venv: Path, probe: ProbeRunner,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """transformers 5 reads tekken.json (with mistral_common) and tiktoken text itself."""
    venv_dir = with_pinned_packages(make_venv(tmp_path_factory.mktemp("venvs") / "venv_mc"), pinned_venv)
    model = layout_dirs[layout]
    result = probe(venv_dir, model, sample=False)
    assert result["loaded"] is True and "source" not in result, result["error"]
    section, findings = _fallback(model, result)
    assert section["source"] == "transformers"
    assert [f for f in findings if f["code"] == "tokenizer-fallback-disagrees"] == []
    expected = truth(layout, model, pinned_venv)
    files = section["from_files"]
    assert (files["vocab_size"], files["len"]) == (section["vocab_size"], section["len"]) == (
        expected["vocab_size"], expected["len"])


def test_layout_numbers_are_the_published_ones(layout_dirs: dict[str, Path]) -> None:
    """Known facts of these files, so a truth script that drifted cannot hide a bug."""
    tekken, _ = _fallback(layout_dirs["mistral-native-tekken"], None)
    assert (tekken["vocab_size"], len(tekken["special_tokens"])) == (131072, 1000)
    assert (tekken["bos"], tekken["eos"]) == ({"token": "<s>", "id": 1}, {"token": "</s>", "id": 2})
    assert tekken["files"]["choice"]["file"] == "tekken.json"
    meta, _ = _fallback(layout_dirs["tiktoken-specials-in-code"], None)
    assert (meta["vocab_size"], meta["files"]["base"]) == (128256, 128000)
    assert meta["eos"] == {"token": "<|end_of_text|>", "id": 128001}
    # llama_models 0.3.0 names 12 specials, then f"<|reserved_special_token_{2 + i}|>" for 244 more
    # (HF's Llama-3.1 tokenizer.json, with fewer named ones, ends at _247).
    assert meta["special_tokens"][-1] == {"token": "<|reserved_special_token_245|>", "id": 128255}
    v3, _ = _fallback(layout_dirs["mistral-model.v3"], None)
    assert (v3["vocab_size"], v3["class"]) == (32768, "SentencePieceTokenizer")


def test_mistral_native_dir_is_a_model_dir(layout_dirs: dict[str, Path]) -> None:
    model = layout_dirs["mistral-native-tekken"]
    facts, errors = collect_files(str(model))
    assert facts["status"] == "ok" and errors == []
    assert facts["config_source"] == "params.json" and facts["native_params"] == NEMO_PARAMS
    config = facts["config"]
    # vLLM's mapping (vllm/transformers_utils/configs/mistral.py, _remap_general_mistral_args)
    assert {k: config[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                   "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size")} == {
        "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 14336, "vocab_size": 131072}
    assert (config["model_type"], config["architectures"]) == ("mistral", ["MistralForCausalLM"])
    arch = analyze_architecture(config, config_path=str(model / "params.json"))
    assert arch is not None


def test_meta_params_width_is_llama_models_formula(layout_dirs: dict[str, Path]) -> None:
    facts, _ = collect_files(str(layout_dirs["meta-original-tiktoken"]))
    # Llama-3.1-8B: intermediate_size 14336 in its HF config.json (realconfigs/llama-3.1-8b).
    real = json.loads((Path(__file__).parents[1] / "data" / "realconfigs" / "llama-3.1-8b" / "config.json").read_text())
    assert facts["config"]["intermediate_size"] == real["intermediate_size"] == 14336
    assert facts["config"]["model_type"] == "llama" and facts["config"]["vocab_size"] == real["vocab_size"]


def test_tokenizer_only_dirs_are_model_dirs(tmp_path: Path, layout_dirs: dict[str, Path]) -> None:
    for layout in ("sentencepiece-spiece.model", "mistral-model.v3"):
        facts, errors = collect_files(str(layout_dirs[layout]))
        assert facts["status"] == "ok", (layout, errors)


# ---------------------------------------------------------------- Kimi: the count through a constant


def _kimi_with_constant(dest: Path) -> Path:
    model = build_kimi_model(dest)
    code = model / "tokenization_kimi.py"
    source = code.read_text()
    assert "    num_reserved_special_tokens = 256\n" in source
    code.write_text(source.replace("    num_reserved_special_tokens = 256\n",
                                   "    num_reserved_special_tokens = NUM_RESERVED_SPECIAL_TOKENS\n")
                    .replace("import tiktoken\n", "import tiktoken\nfrom .tokenization_consts import NUM_RESERVED_SPECIAL_TOKENS\n", 1))
    (model / "tokenization_consts.py").write_text("BASE_RESERVED = 128\nNUM_RESERVED_SPECIAL_TOKENS = BASE_RESERVED * 2\n")
    return model


@pytest.fixture(scope="module")
def kimi_constant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _kimi_with_constant(tmp_path_factory.mktemp("kimi-const") / "Kimi-K2.6")


@pytest.mark.slow
def test_kimi_reserved_count_through_a_module_constant(
    kimi_constant: Path, venv_full: Path, venv_no_tiktoken: Path, probe: ProbeRunner
) -> None:
    files, errors = collect_tokenizer_files(str(kimi_constant), json_cap=CAP)
    assert errors == []
    static = files["remote_code"]["static"]["reserved"]
    assert static == {"count": 256, "expression": "NUM_RESERVED_SPECIAL_TOKENS", "declared_in": "tokenization_kimi.py",
                      "resolved_in": "tokenization_consts.py", "extra": 0}
    loaded_probe = probe(venv_full, kimi_constant, sample=False)
    assert loaded_probe["loaded"] is True, loaded_probe["error"]
    failed_probe = probe(venv_no_tiktoken, kimi_constant, sample=False)
    assert failed_probe["loaded"] is False
    target = {"venv": str(venv_full), "model_path": str(kimi_constant)}
    loaded, loaded_findings = analyze_tokenizer(files, loaded_probe, config=None, target=target, remote_code_allowed=True)
    fallback, _ = analyze_tokenizer(files, failed_probe, config=None, target=target, remote_code_allowed=True)
    for key in ("vocab_size", "len", "bos", "eos", "pad", "unk", "special_tokens"):
        assert fallback[key] == loaded[key], key
    assert fallback["vocab_size"] == 163840 and fallback["files"]["reserved"] == 256
    assert [f for f in loaded_findings if f["code"] == "tokenizer-fallback-disagrees"] == []

    result = diff_tokenizer({"tokenizer": loaded}, {"tokenizer": fallback}, ("a", "b"))
    assert result["changes"] == [{"key": "loaded", "a": True, "b": False}]
    [note] = result["notes"]
    assert note.startswith("b could not load the tokenizer (ImportError") and "missing tiktoken" in note


@pytest.mark.slow
def test_diff_of_identical_kimi_dirs_one_without_tiktoken(
    kimi_loaded: dict[str, Any], kimi_no_tiktoken: dict[str, Any], kimi_model: Path
) -> None:
    files, _ = collect_tokenizer_files(str(kimi_model), json_cap=CAP)
    a, _ = analyze_tokenizer(files, kimi_loaded, config=None, target={}, remote_code_allowed=True)
    b, _ = analyze_tokenizer(files, kimi_no_tiktoken, config=None, target={}, remote_code_allowed=True)
    result = diff_tokenizer({"tokenizer": b}, {"tokenizer": a}, ("a", "b"))
    assert result["changes"] == [{"key": "loaded", "a": False, "b": True}]
    assert result["template_diff"] is None and "a could not load" in result["notes"][0]


# ---------------------------------------------------------------- same story, pure


def test_a_disagreement_names_field_values_and_file(kimi_model: Path) -> None:
    files, _ = collect_tokenizer_files(str(kimi_model), json_cap=CAP)
    probe_result = {"loaded": True, "class": "TikTokenTokenizer", "vocab_size": 163584, "len": 163840,
                    "bos": {"token": "[BOS]", "id": 163584}, "special_tokens": [], "fact_errors": [], "sample": None}
    _, findings = analyze_tokenizer(files, probe_result, config=None, target={}, remote_code_allowed=True)
    [vocab] = [f for f in findings if f["code"] == "tokenizer-fallback-disagrees" and f["field"] == "vocab_size"]
    assert vocab["severity"] == "warning"
    assert "loaded 163584, files 163840 (read from tiktoken.model)" in vocab["message"]


def test_diff_caps_long_change_lists() -> None:
    a = {"tokenizer": {"loaded": True, "special_tokens": [{"token": f"<{i}>", "id": i} for i in range(300)]}}
    b = {"tokenizer": {"loaded": True, "special_tokens": [{"token": f"[{i}]", "id": i} for i in range(300)]}}
    result = diff_tokenizer(a, b)
    assert len(result["changes"]) == 50
    assert "300 changes; the first 50 are listed, 250 more are not" in result["notes"]


# ---------------------------------------------------------------- choice among candidates, corrupt input


def test_two_tiktoken_files_the_choice_is_named(tmp_path: Path) -> None:
    for name in ("a.tiktoken", "b.tiktoken"):
        (tmp_path / name).write_bytes(b"IQ== 0\nIg== 1\n")
    files, _ = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert files["vocab_choice"] == {"kind": "tiktoken", "file": "a.tiktoken", "candidates": ["a.tiktoken", "b.tiktoken"],
                                     "reason": "first by name: no class or convention picks one of 2 files"}


def test_class_vocab_files_names_decides(kimi_model: Path, tmp_path: Path) -> None:
    import shutil
    model = tmp_path / "m"
    shutil.copytree(kimi_model, model)
    shutil.copyfile(model / "tiktoken.model", model / "aaa.tiktoken")
    files, _ = collect_tokenizer_files(str(model), json_cap=CAP)
    assert files["vocab_choice"]["file"] == "tiktoken.model"
    assert files["vocab_choice"]["reason"] == "the tokenizer class names it in vocab_files_names"


def test_tekken_wins_over_sentencepiece_v3(layout_dirs: dict[str, Path], tmp_path: Path) -> None:
    import shutil
    model = tmp_path / "both"
    shutil.copytree(layout_dirs["mistral-native-tekken"], model)
    shutil.copyfile(layout_dirs["mistral-model.v3"] / "tokenizer.model.v3", model / "tokenizer.model.v3")
    files, _ = collect_tokenizer_files(str(model), json_cap=CAP)
    assert files["vocab_choice"]["file"] == "tekken.json" and "vLLM" in files["vocab_choice"]["reason"]


@pytest.mark.parametrize("data", [b"\n\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\n\x05abc", b"\n\x04\n\x00\x18\x09",
                                  b"\x0f\x00", b"\n\x03\n\x01\xff"])
def test_corrupt_sentencepiece_is_an_error_record(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "spiece.model").write_bytes(data)
    files, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert files["sentencepiece"] == []
    assert [e["type"] for e in errors] == ["malformed-sentencepiece"]


def test_discover_lists_the_new_layouts(layout_dirs: dict[str, Path]) -> None:
    from introspect.remote.facts.model.model_summary import is_model_dir, tokenizer_layout

    for layout, fmt in (("mistral-native-tekken", "tekken"), ("mistral-model.v3", "sentencepiece"),
                        ("sentencepiece-spiece.model", "sentencepiece")):
        names = sorted(p.name for p in layout_dirs[layout].iterdir())
        assert is_model_dir(names, None), layout
        assert fmt in tokenizer_layout(names, None)["formats"], layout


def test_params_json_moe_and_mla_follow_vllm() -> None:
    """vllm/transformers_utils/configs/mistral.py: adapt_config_dict, _remap_moe_args."""
    from introspect.remote.facts.model.native_config import to_hf_config

    base = {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "hidden_dim": 14336, "vocab_size": 32000}
    mixtral = to_hf_config({**base, "moe": {"num_experts": 8, "num_experts_per_tok": 2}})
    assert mixtral is not None
    assert (mixtral["model_type"], mixtral["num_local_experts"], mixtral["num_experts_per_tok"]) == ("mixtral", 8, 2)
    large3 = to_hf_config({**base, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                           "qk_rope_head_dim": 64, "v_head_dim": 128,
                           "moe": {"num_experts": 128, "num_shared_experts": 1, "expert_hidden_dim": 4096,
                                   "num_experts_per_tok": 4, "first_k_dense_replace": 3}})
    assert large3 is not None
    assert (large3["model_type"], large3["architectures"]) == ("deepseek_v3", ["MistralLarge3ForCausalLM"])
    assert (large3["n_routed_experts"], large3["n_shared_experts"], large3["moe_intermediate_size"],
            large3["first_k_dense_replace"], large3["kv_lora_rank"]) == (128, 1, 4096, 3, 512)
    assert to_hf_config({"dim": "x"}) is None and to_hf_config([]) is None


def test_dict_literal_specials_through_constants_equal_tiktoken(tmp_path: Path) -> None:
    """A class that declares its specials as a dict literal, ids written through constants."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tests.fixtures.kimi_model import write_tiktoken_model

    ranks = [bytes([b]) for b in range(256)] + [b"ab", b"cd"]
    write_tiktoken_model(tmp_path / "qwen.tiktoken", ranks)
    (tmp_path / "consts.py").write_text('ENDOFTEXT = "<|endoftext|>"\nSPECIAL_START = 258\n')
    (tmp_path / "tokenization_q.py").write_text(
        "from .consts import ENDOFTEXT, SPECIAL_START\n"
        "class QTokenizer:\n"
        "    special_tokens = {ENDOFTEXT: SPECIAL_START, '<|im_start|>': SPECIAL_START + 1,\n"
        "                      '<|im_end|>': SPECIAL_START + 2}\n"
        "    def __init__(self):\n        self.eos_id = self.special_tokens['<|im_end|>']\n")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"auto_map": {"AutoTokenizer": ["tokenization_q.QTokenizer", None]}}))
    specials = {"<|endoftext|>": 258, "<|im_start|>": 259, "<|im_end|>": 260}
    enc = tiktoken.Encoding(name="q", pat_str=r"\S+|\s+", mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "qwen.tiktoken")),
                            special_tokens=specials)
    section, _ = _fallback(tmp_path, None)
    assert (section["vocab_size"], section["len"]) == (enc.n_vocab, enc.n_vocab) == (261, 261)
    assert section["special_tokens"] == [{"token": t, "id": i} for t, i in specials.items()]
    assert section["eos"] == {"token": "<|im_end|>", "id": enc.encode("<|im_end|>", allowed_special="all")[0]}
    assert section["class"] == "QTokenizer"


# ---------------------------------------------------------------- the readers never raise


def _piece(text: bytes, kind: int) -> bytes:
    body = b"\n" + bytes([len(text)]) + text + b"\x18" + bytes([kind])
    return b"\n" + bytes([len(body)]) + body


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | st.lists(st.tuples(st.binary(max_size=20), st.integers(0, 9)), max_size=8).map(
    lambda ps: b"".join(_piece(t, k) for t, k in ps)))
def test_the_model_proto_reader_raises_only_wire_errors(data: bytes) -> None:
    try:
        summary = summarize_model(parse_model(data))
    except WireError:
        return
    assert summary["pieces"] == sum(summary["types"].values()) > 0


json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 2000) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values, st.dictionaries(st.sampled_from(["default_vocab_size", "default_num_special_tokens", "version",
                                                     "pattern"]), json_values))
def test_the_tekken_summary_never_raises(doc: Any, config: dict[str, Any]) -> None:
    summarize_tekken(doc)
    summary, why = summarize_tekken({"config": config, "special_tokens": doc, "vocab": doc})
    assert (summary is None) != (why is None)


def test_code_in_an_hf_cache_snapshot_is_read_through_its_blob_links(tmp_path: Path) -> None:
    """Snapshot files are links into ../../blobs; a relative import may not climb out. The repo dir
    is named as huggingface_hub names it (``models--org--name``): only there may a snapshot's links
    leave the snapshot dir (https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/file_download.py)."""
    repo = tmp_path / "models--org--name"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (blobs / "1").write_text("from .consts import N\nclass T:\n    num_reserved_special_tokens = N\n")
    (blobs / "2").write_text("N = 7\n")
    (repo / "outside.py").write_text("N = 99\n")
    (snapshot / "tok.py").symlink_to("../../blobs/1")
    (snapshot / "consts.py").symlink_to("../../blobs/2")
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["tok.T", None]}}))
    files, errors = collect_tokenizer_files(str(snapshot), json_cap=CAP)
    assert errors == [] and files["remote_code"]["num_reserved_special_tokens"] == 7
    (blobs / "1").write_text("from ...outside import N\nclass T:\n    num_reserved_special_tokens = N\n")
    files, _ = collect_tokenizer_files(str(snapshot), json_cap=CAP)
    assert files["remote_code"]["static"]["reserved"]["count"] is None  # not followed out of the dir
