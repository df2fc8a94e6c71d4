"""No silent caps, and what transformers' conversions drop, from the real files PyPI packages ship.

The model dirs are tests/fixtures/tokenizer_layouts.py's: mistral_common's ``tekken_240911.json``
(Mistral-Nemo's tokenizer) and ``mistral_instruct_tokenizer_240323.model.v3`` (sentencepiece),
llama-models' Meta Llama-3 ``tokenizer.model`` and its ``Tokenizer`` class. Loads run the
tokenizer task in a venv with transformers and the pinned mistral_common (one interpreter
for every load, to keep the import paid once).

* Caps: every list the host or the aggregator cuts keeps its key, with ``<key>_total`` and
  ``<key>_truncated`` beside it; the text report counts the whole list ("(+N more)"). A cap
  is made small here (monkeypatched) so that a real file crosses it.
* Losses: transformers 5 loads tekken.json without bos/eos/pad/unk; Meta's ranks file
  without the specials its class defines. The files know them: a warning names them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from introspect.analysis.profile import build_profile
from introspect.analysis.tokenizer.section import analyze_tokenizer
from introspect.analysis.tokenizer.section import tokenizer_section as typed_section
from introspect.analysis.tokenizer.tokenizer_agreement import disagreements, file_facts
from introspect.analysis.tokenizer.tokenizer_fallback import facts_from_files
from introspect.cli.render import tokenizer_section
from introspect.remote.facts.model import files, listing
from introspect.remote.facts.tokenizer import added_tokens, sentencepiece_model
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.fixtures.tokenizer_layouts import build_layout, tok_venv, with_pinned_packages
from tests.fixtures.venvs import make_venv
from tests.tokenizer.conftest import MARK, REPO, probe_env

CAP = 1 << 26
TARGET = {"venv": "/v", "model_path": "/models/m"}
# Mistral-Nemo's tekken_240911.json names these (mistral_common's Tekkenizer: unk_id 0,
# bos_id 1, eos_id 2, pad_id 11); tests/tokenizer/test_layouts.py checks the fallback
# against Tekkenizer itself.
TEKKEN_NAMED = {"bos": {"token": "<s>", "id": 1}, "eos": {"token": "</s>", "id": 2},
                "pad": {"token": "<pad>", "id": 11}, "unk": {"token": "<unk>", "id": 0}}
CHECK_CAP = 600  # the task's MAX_CHECKED_IDS, made smaller than tekken's 1000 specials
LOADS = (
    "import json, sys\n"
    "import introspect.remote.tasks.tokenizer as task\n"
    "default, out = task.MAX_CHECKED_IDS, []\n"
    "for request in json.loads(sys.stdin.read()):\n"
    "    task.MAX_CHECKED_IDS = request.pop('max_checked', default)\n"
    "    out.append(task.run(request))\n"
    f"sys.stdout.write({MARK!r} + json.dumps(out))\n"
)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root, pinned = tmp_path_factory.mktemp("caps-layouts"), tok_venv()
    out = {name: build_layout(layout, root / name, pinned) for name, layout in (
        ("tekken", "mistral-native-tekken"), ("tekken-named", "mistral-native-tekken"),
        ("meta", "meta-original-tiktoken"), ("meta-code", "tiktoken-specials-in-code"),
        ("v3", "mistral-model.v3"))}
    # The fix the loss finding gives, plus added_tokens_decoder listing tekken's specials (as
    # Mistral's HF repos ship it): the names load, and the check of 1,000 ids is cut at CHECK_CAP.
    tekken, _ = collect_tokenizer_files(str(out["tekken"]), json_cap=CAP)
    specials = tekken["tekken"]["special_tokens"]
    config = {f"{attr}_token": pair["token"] for attr, pair in TEKKEN_NAMED.items()}
    config["added_tokens_decoder"] = {str(t["id"]): {"content": t["token"], "special": True} for t in specials}
    (out["tekken-named"] / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def loads(dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The tokenizer task's result per dir, transformers 5 with mistral_common beside it."""
    venv = with_pinned_packages(make_venv(tmp_path_factory.mktemp("venvs") / "venv_mc"), tok_venv())
    names = ("tekken", "tekken-named", "meta")
    requests = [{"model_path": str(dirs[n]), "trust_remote_code": True, "sample": False} for n in names]
    requests[1]["max_checked"] = CHECK_CAP
    cache = tmp_path_factory.mktemp("probe-cache")
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", LOADS], input=json.dumps(requests),
                          capture_output=True, text=True, timeout=600, env=probe_env(cache), cwd=str(REPO))
    assert MARK in proc.stdout, proc.stderr[-3000:]
    return dict(zip(names, json.loads(proc.stdout.split(MARK, 1)[1]), strict=True))


def _analyze(model: Path, probe: dict[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    raw_files, errors = collect_tokenizer_files(str(model), json_cap=CAP)
    assert errors == []
    return analyze_tokenizer(raw_files, probe, config=None, target=dict(TARGET, model_path=str(model)),
                             remote_code_allowed=True)


def _codes(findings: list[dict[str, Any]]) -> list[str]:
    return [f["code"] for f in findings]


# ---------------------------------------------------------------- losses of a conversion


@pytest.mark.slow
def test_tekken_loaded_by_transformers_loses_the_named_tokens(dirs: dict[str, Path], loads: dict[str, Any]) -> None:
    probe = loads["tekken"]
    assert probe["loaded"] is True and "source" not in probe, probe["error"]
    assert (probe["class"], probe["bos"], probe["eos"], probe["pad"], probe["unk"]) == (
        "TokenizersBackend", None, None, None, None)
    section, findings = _analyze(dirs["tekken"], probe)
    [loss] = [f for f in findings if f["code"] == "tokenizer-conversion-loss"]
    assert loss["severity"] == "warning" and loss["fields"] == ["bos", "eos", "pad", "unk"]
    assert loss["files_values"] == TEKKEN_NAMED == {a: section["from_files"][a] for a in TEKKEN_NAMED}
    assert "read from tekken.json" in loss["message"] and "tekken conversion" in loss["message"]
    assert loss["reference"].endswith("tokenization_utils_tokenizers.py#L207-L212")
    assert "tokenizer-fallback-disagrees" not in _codes(findings)  # the same specials on both sides
    # The fix's tokenizer_config.json is the one the next dir loads with: the names come back.
    assert json.loads(loss["fix"].split("tokenizer_config.json: ", 1)[1].split("; ", 1)[0]) == {
        f"{a}_token": p["token"] for a, p in TEKKEN_NAMED.items()}
    fixed = loads["tekken-named"]
    assert {a: fixed[a] for a in TEKKEN_NAMED} == TEKKEN_NAMED
    assert "tokenizer-conversion-loss" not in _codes(_analyze(dirs["tekken-named"], fixed)[1])


@pytest.mark.slow
def test_meta_ranks_loaded_by_transformers_lose_the_specials_the_class_defines(
    dirs: dict[str, Path], loads: dict[str, Any]
) -> None:
    """transformers' tiktoken conversion of Meta's tokenizer.model keeps the 128,000 ranks and no special.

    The files side is the same tokenizer.model beside llama_models' Tokenizer class, which
    defines 256 specials from id 128000; the loaded side is transformers' load of the ranks
    file. Alone, the bare Meta dir names no special, so nothing is lost there (what the
    files do not name, no check can call lost)."""
    probe = loads["meta"]
    assert (probe["loaded"], probe["len"], probe["special_tokens"], probe["special_tokens_total"]) == (
        True, 128000, [], 0)
    assert "tokenizer-conversion-loss" not in _codes(_analyze(dirs["meta"], probe)[1])
    section, findings = _analyze(dirs["meta-code"], probe)
    [loss] = [f for f in findings if f["code"] == "tokenizer-conversion-loss"]
    # The class also names bos/eos/pad among its specials (self.bos_id = self.special_tokens[...]).
    named = {a: section["from_files"][a] for a in ("bos", "eos", "pad")}
    assert loss["fields"] == ["bos", "eos", "pad", "special_tokens"] and loss["files_values"] == named
    assert (named["bos"], named["eos"]) == ({"token": "<|begin_of_text|>", "id": 128000},
                                           {"token": "<|end_of_text|>", "id": 128001})
    assert "256 special tokens (ids 128000..128255)" in loss["message"] and "tiktoken conversion" in loss["message"]
    assert loss["reference"].endswith("tokenization_utils_tokenizers.py#L273-L306")
    assert section["from_files"]["special_tokens_total"] == 256


@pytest.mark.slow
def test_an_older_probe_without_the_keys_reports_no_loss(dirs: dict[str, Path], loads: dict[str, Any]) -> None:
    """A raw file of a probe that predates a key says nothing about it: no "none" is read into it."""
    probe = {k: v for k, v in loads["tekken"].items() if k not in ("bos", "eos", "pad", "unk")}
    section, findings = _analyze(dirs["tekken"], probe)
    assert "tokenizer-conversion-loss" not in _codes(findings)
    assert all(section["sources"][a] is None for a in ("bos", "eos", "pad", "unk"))


# ---------------------------------------------------------------- caps of the loaded side


@pytest.mark.slow
def test_the_loaded_lists_carry_their_totals(dirs: dict[str, Path], loads: dict[str, Any]) -> None:
    probe = loads["tekken"]
    assert (len(probe["special_tokens"]), probe["special_tokens_total"], probe["special_tokens_truncated"]) == (
        1000, 1000, False)
    check = loads["tekken-named"]["added_tokens_check"]
    assert (check["checked"], check["checked_total"], check["checked_truncated"]) == (CHECK_CAP, 1000, True)
    assert (len(check["items"]), check["items_total"], check["items_truncated"]) == (CHECK_CAP, CHECK_CAP, False)
    assert [i["id"] for i in check["items"]] == list(range(CHECK_CAP))  # the first ids, in order
    section, findings = _analyze(dirs["tekken-named"], loads["tekken-named"])
    assert {k: section["added_tokens_check"][k] for k in ("checked", "checked_total", "checked_truncated")} == {
        "checked": CHECK_CAP, "checked_total": 1000, "checked_truncated": True}
    [partial] = [f for f in findings if f["code"] == "added-tokens-check-partial"]
    assert partial["severity"] == "info" and f"first {CHECK_CAP} of the 1000 ids" in partial["message"]
    assert partial["fix"].startswith(f"introspect preflight --model {dirs['tekken-named']} --venv /v")


def test_the_mismatch_list_of_preflight_says_how_many_it_left_out() -> None:
    """preflight keeps the first failing items: the count of all of them rides along."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    expected = {i: (f"<|absent_{i}|>", "tokenizer_config.json") for i in (5, 6, 7)}
    check = added_tokens.check_added_tokens(tok, expected, encode=True, mismatches_only=True, max_items=1)
    assert (check["mismatches"], len(check["items"]), check["items_total"], check["items_truncated"]) == (3, 1, 3, True)
    assert (check["checked"], check["checked_total"], check["checked_truncated"]) == (3, 3, False)


# ---------------------------------------------------------------- caps of the files side


@pytest.fixture
def v3_cut(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """(full summary, cut summary) of the real Mistral v3 sentencepiece model."""
    full, _ = collect_tokenizer_files(str(dirs["v3"]), json_cap=CAP)
    monkeypatch.setattr(sentencepiece_model, "MAX_LISTED_PIECES", 100)
    cut, _ = collect_tokenizer_files(str(dirs["v3"]), json_cap=CAP)
    return full, cut


def test_the_sentencepiece_reader_says_it_cut(v3_cut: tuple[dict[str, Any], dict[str, Any]]) -> None:
    full, cut = (f["sentencepiece"][0] for f in v3_cut)
    specials = full["types"]["control"] + full["types"]["unknown"]
    assert full["special_pieces_total"] == len(full["special_pieces"]) > 100 and not full["special_pieces_truncated"]
    assert (len(cut["special_pieces"]), cut["special_pieces_total"], cut["special_pieces_truncated"]) == (
        100, full["special_pieces_total"], True)
    # The cut keeps the pieces the fallback's specials are made of, the lowest ids first.
    assert cut["special_pieces"] == [p for p in full["special_pieces"] if p["type"] != "user_defined"][:100]
    assert specials > 100


def test_a_cut_files_list_keeps_its_total_in_the_profile_and_the_text(
    v3_cut: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    full_files, cut_files = v3_cut
    full, _ = analyze_tokenizer(full_files, None, config=None, target=TARGET, remote_code_allowed=True)
    section, _ = analyze_tokenizer(cut_files, None, config=None, target=TARGET, remote_code_allowed=True)
    total = len(full["special_tokens"])
    assert (full["special_tokens_total"], full["special_tokens_truncated"]) == (total, False)
    assert section["special_tokens"] == full["special_tokens"][:100]
    assert (section["special_tokens_total"], section["special_tokens_truncated"]) == (total, True)
    console = Console(record=True, width=400)
    console.print(tokenizer_section({"tokenizer": section}))
    text = console.export_text()
    assert f"special tokens ({total})" in text and f"(+{total - 12} more)" in text


def test_the_same_story_check_compares_only_what_both_cut_lists_cover(
    v3_cut: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    full_files, cut_files = v3_cut
    full, _ = typed_section(full_files, None, config=None, target=TARGET, remote_code_allowed=True)
    files = file_facts(facts_from_files(cut_files)).model_copy(
        update={"special_tokens_truncated": True, "vocab_file": "tokenizer.model.v3"})
    # Loaded with every special (as sentencepiece lists them): the files' cut is no difference.
    loaded = full.model_copy(update={"loaded": True, "source": "sentencepiece"})
    assert disagreements(loaded, files) == []
    # A real difference below the cut still is one; the ids past it are not counted.
    renamed = [t.model_copy(update={"token": "<x>"}) if t.id == 5 else t for t in full.special_tokens]
    [finding] = disagreements(loaded.model_copy(update={"special_tokens": renamed}), files)
    last = files.special_tokens[-1].id
    assert f"1 ids differ (ids up to {last}: a list was cut there)" in finding.message
    assert f"{full.special_tokens_total} specials" in finding.message


def test_a_cut_listing_says_so_in_the_raw_facts_and_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "a.safetensors", "b.safetensors"):
        (model / name).write_text("{}")
    monkeypatch.setattr(listing, "MAX_LISTING", 3)
    facts, _ = files.collect_files(str(model))
    assert (len(facts["listing"]), facts["listing_total"], facts["listing_truncated"]) == (3, 5, True)
    profile = build_profile({"files": facts, "target": {"model_path": str(model)}})
    assert {k: profile["files"][k] for k in ("listing_total", "listing_truncated")} == {
        "listing_total": 5, "listing_truncated": True}
    assert len(profile["files"]["listing"]) == 3
