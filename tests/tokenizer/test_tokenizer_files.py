"""Raw tokenizer facts from files (introspect.remote.facts.tokenizer.tokenizer_files), no transformers."""

from __future__ import annotations

import ast
import base64
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from introspect.remote import contract
from introspect.remote.facts.tokenizer.tiktoken import summarize_tiktoken_lines
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from introspect.remote.facts.tokenizer.tokenizer_json import summarize_tokenizer_json
from tests.fixtures.kimi_model import CHAT_TEMPLATE, KIMI_ADDED_TOKENS, NUM_RANKS, build_kimi_model

REMOTE = Path(contract.__file__).parent
CAP = 16 * 1024 * 1024


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_kimi_facts(kimi_model: Path) -> None:
    facts, errors = collect_tokenizer_files(str(kimi_model), json_cap=CAP)
    assert errors == []

    [tik] = facts["tiktoken"]
    assert tik["file"] == "tiktoken.model"
    assert (tik["entries"], tik["distinct_tokens"], tik["distinct_ranks"]) == (NUM_RANKS,) * 3
    assert (tik["min_rank"], tik["max_rank"], tik["dense"], tik["gaps"]) == (0, NUM_RANKS - 1, True, 0)
    assert (tik["duplicate_tokens"], tik["duplicate_ranks"], tik["malformed_lines"]) == (0, 0, 0)
    assert tik["single_bytes"] == 256
    assert tik["sha256"] == _sha(kimi_model / "tiktoken.model")
    assert tik["size"] == (kimi_model / "tiktoken.model").stat().st_size

    remote = facts["remote_code"]
    assert remote["auto_map"] == ["tokenization_kimi.TikTokenTokenizer", None]
    assert remote["slow"]["file"] == "tokenization_kimi.py" and remote["slow"]["exists"]
    assert remote["slow"]["class"] == "TikTokenTokenizer"
    assert remote["slow"]["sha256"] == _sha(kimi_model / "tokenization_kimi.py")
    assert remote["fast"] is None
    assert (remote["num_reserved_special_tokens"], remote["reserved_extra"]) == (256, 0)
    assert remote["placeholder"] == "<|reserved_token_{id}|>"

    config = facts["tokenizer_config"]
    assert config["tokenizer_class"] == "TikTokenTokenizer"
    assert {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()} == {
        i: c for i, (c, _) in KIMI_ADDED_TOKENS.items()
    }
    assert facts["special_tokens_map"]["unk_token"] == "[UNK]"
    [template] = facts["chat_templates"]
    assert template["source"] == "chat_template.jinja" and template["name"] == "default"
    assert template["text"] == CHAT_TEMPLATE
    assert template["sha256"] == _sha(kimi_model / "chat_template.jinja")
    assert facts["tokenizer_json"] is None and facts["sentencepiece"] == []


def test_inline_template_moves_out_of_tokenizer_config(tmp_path: Path) -> None:
    model = build_kimi_model(tmp_path / "m", template_in_config=True)
    facts, errors = collect_tokenizer_files(str(model), json_cap=CAP)
    assert errors == []
    assert "chat_template" not in facts["tokenizer_config"]
    sources = [t["source"] for t in facts["chat_templates"]]
    assert sources == ["chat_template.jinja", "tokenizer_config.json"]  # precedence order
    assert len({t["sha256"] for t in facts["chat_templates"]}) == 1


def test_named_templates_and_processor_template(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})
    )
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": "C"}))
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "rag.jinja").write_text("D")
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    got = [(t["source"], t["name"], t["text"]) for t in facts["chat_templates"]]
    assert got == [
        ("additional_chat_templates/rag.jinja", "rag", "D"),
        ("chat_template.json", "default", "C"),
        ("tokenizer_config.json", "default", "A"),
        ("tokenizer_config.json", "tool_use", "B"),
    ]


def test_kimi_linear_reserve_and_hub_prefixed_auto_map(tmp_path: Path) -> None:
    """Kimi-Linear's class reserves 256 + 2 ids; auto_map may carry a repo prefix."""
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"auto_map": {"AutoTokenizer": ["moonshotai/Kimi-Linear--tokenization_kimi.TikTokenTokenizer", None]}})
    )
    (tmp_path / "tokenization_kimi.py").write_text(
        "from .helpers import x\nclass TikTokenTokenizer:\n    num_reserved_special_tokens = 256\n"
        "    def f(self, n):\n        return range(n, n + self.num_reserved_special_tokens + 2)\n"
    )
    (tmp_path / "helpers.py").write_text('x = lambda i: f"<|reserved_token_{i}|>"\n')
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    remote = facts["remote_code"]
    assert remote["slow"]["file"] == "tokenization_kimi.py"
    assert (remote["num_reserved_special_tokens"], remote["reserved_extra"]) == (256, 2)
    assert remote["placeholder"] == "<|reserved_token_{id}|>"  # found in the relative import


def test_auto_map_from_config_json_and_missing_module(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": "tok_mod.MyTok"}}))
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    remote = facts["remote_code"]
    assert remote["auto_map_source"] == "config.json"
    assert remote["slow"]["file"] == "tok_mod.py" and remote["slow"]["exists"] is False
    assert remote["num_reserved_special_tokens"] is None


def test_path_traversal_in_auto_map_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": "..x/evil.Cls"}}))
    facts, _ = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert facts["remote_code"]["slow"]["file"] is None


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("{", "malformed-json"),
        ('{"a": NaN}', "malformed-json"),
        ("[1, 2]", "wrong-type"),
        ("", "malformed-json"),
        ("x" * 8192, "too-large"),
    ],
)
def test_bad_tokenizer_config_is_one_error_not_a_crash(tmp_path: Path, content: str, kind: str) -> None:
    model = build_kimi_model(tmp_path / "m")
    (model / "tokenizer_config.json").write_text(content)
    facts, errors = collect_tokenizer_files(str(model), json_cap=4096)
    assert [(e["probe"], e["type"], e["path"]) for e in errors] == [
        ("tokenizer_files", kind, str(model / "tokenizer_config.json"))
    ]
    assert facts["tokenizer_config"] is None
    assert facts["tiktoken"][0]["entries"] == NUM_RANKS  # the other facts stand


def test_non_utf8_template_and_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_bytes(b"\xff\xfe{{ x }}")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.symlink(tmp_path / "loop", tmp_path / "special_tokens_map.json")
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert sorted(e["type"] for e in errors) == ["not-utf8", "symlink-loop"]
    assert all(e["probe"] == "tokenizer_files" for e in errors)
    assert facts["chat_templates"] == [] and facts["special_tokens_map"] is None


def test_missing_dir_gives_empty_facts(tmp_path: Path) -> None:
    facts, errors = collect_tokenizer_files(str(tmp_path / "nope"), json_cap=CAP)
    assert facts["tokenizer_config"] is None and facts["tiktoken"] == []
    assert errors == []  # the files probe reports a bad model path, once


def test_tiktoken_statistics() -> None:
    def line(token: bytes, rank: object) -> bytes:
        return base64.b64encode(token) + b" " + str(rank).encode() + b"\n"

    lines = [
        line(b"a", 0),
        line(b"b", 1),
        line(b"a", 2),  # duplicate token
        line(b"c", 1),  # duplicate rank
        line(b"dd", 5),  # gap 3..4
        b"\n",  # blank: ignored, as tiktoken does
        b"!!!notbase64 3\n",
        b"onlyonefield\n",
        line(b"e", "x"),
        line(b"f", -1),
    ]
    s = summarize_tiktoken_lines(lines)
    assert s["entries"] == 5 and s["malformed_lines"] == 4
    assert (s["distinct_tokens"], s["distinct_ranks"]) == (4, 4)
    assert (s["duplicate_tokens"], s["duplicate_ranks"]) == (1, 1)
    assert (s["min_rank"], s["max_rank"], s["gaps"], s["dense"]) == (0, 5, 2, False)
    assert [m["line"] for m in s["malformed_examples"]] == [7, 8, 9, 10]
    assert s["single_bytes"] == 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.integers(-3, 40)), max_size=40))
def test_tiktoken_summary_properties(pairs: list[tuple[bytes, int]]) -> None:
    lines = [base64.b64encode(t) + b" " + str(r).encode() for t, r in pairs]
    s = summarize_tiktoken_lines(lines)
    valid = [(t, r) for t, r in pairs if r >= 0]
    assert s["entries"] == len(valid)
    assert s["malformed_lines"] == len(pairs) - len(valid)
    assert s["distinct_tokens"] == len({t for t, _ in valid})
    ranks = sorted(r for _, r in valid)
    assert s["dense"] == (bool(ranks) and ranks == list(range(len(ranks))))


B64ISH = st.sampled_from([b"QQ==", b"QR==", b"QUI=", b"QUJD", b"QQ", b"Q===", b"=QQ=", b"YWJj", b"+/8=", b"Zg==",
                          b"YQ==", b"!!", b""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(B64ISH | st.binary(min_size=1, max_size=3).map(base64.b64encode),
                          st.sampled_from([b"0", b"1", b"007", b"2", b"-1", b"x", b"40", b""]),
                          st.sampled_from([b" ", b"  ", b"\t"]), st.sampled_from([b"\n", b"\r\n", b"\n\n", b""])),
                max_size=25))
def test_a_canonical_file_is_summarised_in_c_as_line_by_line(rows: list[tuple[bytes, bytes, bytes, bytes]]) -> None:
    """The whole-file fast path answers exactly what the per-line path answers, or leaves it to it."""
    import io

    from introspect.remote.facts.tokenizer.tiktoken import _canonical_summary

    data = b"".join(token + sep + rank + end for token, rank, sep, end in rows)
    fast = _canonical_summary(data)
    if fast is not None:
        assert fast == summarize_tiktoken_lines(io.BytesIO(data))


def test_a_real_sized_canonical_file_takes_the_fast_path(tmp_path: Path) -> None:
    import io

    from introspect.remote.facts.tokenizer.tiktoken import _canonical_summary, summarize_tiktoken_file

    data = b"".join(base64.b64encode(i.to_bytes(3, "big")) + b" %d\n" % i for i in range(5000))
    (tmp_path / "tiktoken.model").write_bytes(data)
    fast = _canonical_summary(data)
    assert fast is not None and fast == summarize_tiktoken_lines(io.BytesIO(data))
    summary, err = summarize_tiktoken_file(str(tmp_path / "tiktoken.model"))
    assert err is None and summary is not None and summary["entries"] == 5000 and summary["dense"] is True


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=30), max_size=20))
def test_tiktoken_parser_never_raises(lines: list[bytes]) -> None:
    s = summarize_tiktoken_lines(lines)
    assert s["entries"] + s["malformed_lines"] <= len(lines)


def test_tiktoken_text_under_a_sentencepiece_name(tmp_path: Path) -> None:
    """Llama-3's original/tokenizer.model is tiktoken text; real sentencepiece is protobuf."""
    (tmp_path / "tokenizer.model").write_bytes(b"IQ== 0\nIg== 1\n")
    # One piece {piece: "<unk>", score: 0.0}: 12 bytes (this fixture said 11 before the
    # ModelProto reader existed, a truncated message it now reports).
    (tmp_path / "spiece.model").write_bytes(b"\n\x0c\n\x05<unk>\x15\x00\x00\x00\x00")
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    assert [(t["file"], t["entries"], t["dense"]) for t in facts["tiktoken"]] == [("tokenizer.model", 2, True)]
    [sp] = facts["sentencepiece"]
    assert sp["file"] == "spiece.model" and sp["sha256"] == _sha(tmp_path / "spiece.model")


def test_tokenizer_json_summary_shapes() -> None:
    doc = {
        "added_tokens": [{"id": 0, "content": "<s>", "special": True}, {"id": 9, "content": "x", "special": False}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend"}, {"type": "Replace"}]},
        "pre_tokenizer": None,
        "decoder": {"type": "ByteLevel"},
        "post_processor": {
            "type": "Sequence",
            "processors": [
                {"type": "ByteLevel"},
                {
                    "type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}},
                },
            ],
        },
        "model": {"type": "Unigram", "vocab": [["<s>", 0.0], ["a", -1.0], ["b", -2.0]]},
    }
    s = summarize_tokenizer_json(doc, ["b"])
    assert (s["model_type"], s["vocab_size"], s["max_vocab_id"], s["merges"]) == ("Unigram", 3, 2, None)
    assert s["normalizer"] == "Sequence[Prepend,Replace]" and s["decoder"] == "ByteLevel"
    assert s["post_processor"] == {
        "type": "TemplateProcessing",
        "single": "<s> $A",
        "bos": {"token": "<s>", "id": 0},
        "eos": None,
    }
    assert s["added_tokens"][1] == {"id": 9, "content": "x", "special": False}
    assert s["vocab_lookup"] == {"b": 2}
    roberta = summarize_tokenizer_json({"post_processor": {"type": "RobertaProcessing", "cls": ["<s>", 0], "sep": ["</s>", 2]}})
    assert roberta["post_processor"]["eos"] == {"token": "</s>", "id": 2}
    assert summarize_tokenizer_json({"model": "garbage", "added_tokens": "x"})["vocab_size"] is None


def test_remote_modules_are_python38_stdlib_only() -> None:
    """The remote side ships to hosts with Python 3.8 and nothing installed."""
    names = sorted(str(p.relative_to(REMOTE)) for p in REMOTE.rglob("*.py"))
    assert {"facts/tokenizer/tokenizer_files.py", "tasks/tokenizer.py"} <= set(names)
    for name in names:
        source = (REMOTE / name).read_text()
        tree = ast.parse(source, feature_version=(3, 8))
        for node in tree.body:  # module level only: run() may import transformers lazily
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            for top in tops:
                assert top in sys.stdlib_module_names or top == "__future__", (name, top)
        assert "removeprefix" not in source


def _python38() -> str | None:
    candidates = [shutil.which("python3.8"), *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))]
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 8)":
            return exe
    return None


def test_remote_modules_run_on_python38(kimi_model: Path) -> None:
    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    code = (
        "import json, sys\n"
        "from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files\n"
        "from introspect.remote.tasks.tokenizer import run\n"
        "facts, errors = collect_tokenizer_files(sys.argv[1], json_cap=1 << 24)\n"
        "probe = run({'model_path': sys.argv[1], 'trust_remote_code': True, 'sample': True})\n"
        "print(json.dumps([facts['tiktoken'][0]['entries'], errors, probe['loaded'], probe['error'] is not None]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REMOTE.parent.parent), PYTHONNOUSERSITE="1")
    out = subprocess.run([exe, "-B", "-c", code, str(kimi_model)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    entries, errors, loaded, has_error = json.loads(out.stdout.strip().splitlines()[-1])
    assert (entries, errors) == (NUM_RANKS, [])
    assert loaded or has_error  # without transformers there: a classified error, never a crash


def test_reserved_ids_are_found_through_a_package_relative_import(tmp_path: Path) -> None:
    """Relative imports are followed by the one AST parser (facts.custom_code), ``from . import x`` too."""
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}))
    (tmp_path / "tokenization_x.py").write_text("from . import names\nclass XTokenizer:\n    pass\n")
    (tmp_path / "names.py").write_text(
        "num_reserved_special_tokens = 8\nname = lambda i: f\"<|reserved_{i}|>\"\n")
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    remote = facts["remote_code"]
    assert remote["reserved_declared_in"] == "names.py" and remote["num_reserved_special_tokens"] == 8
    assert remote["placeholder"] == "<|reserved_{id}|>"


def test_a_reference_with_two_repo_separators_is_unusable_everywhere(tmp_path: Path) -> None:
    """transformers splits "repo--module.Class" once; with two separators neither section follows it."""
    from introspect.remote.facts.model.files import collect_files

    ref = "org/a--org/b--tokenization_x.XTokenizer"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ref}}))
    (tmp_path / "tokenization_x.py").write_text("class XTokenizer:\n    pass\n")
    facts, _ = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert facts["remote_code"]["slow"]["file"] is None
    files, _ = collect_files(str(tmp_path), json_cap=CAP)
    assert files["custom_code"] == []


def test_a_constant_from_a_sub_package_resolves_to_the_file_the_files_section_follows(tmp_path: Path) -> None:
    """``from .consts import N`` with consts a package: both sections read consts/__init__.py."""
    from introspect.remote.facts.model.files import collect_files

    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}))
    (tmp_path / "tokenization_x.py").write_text(
        "from .consts import NUM\nclass XTokenizer:\n    num_reserved_special_tokens = NUM\n")
    (tmp_path / "consts").mkdir()
    (tmp_path / "consts" / "__init__.py").write_text("NUM = 252 + 4\n")
    facts, errors = collect_tokenizer_files(str(tmp_path), json_cap=CAP)
    assert errors == []
    remote = facts["remote_code"]
    assert remote["num_reserved_special_tokens"] == 256
    assert remote["reserved_declared_in"] == "consts/__init__.py"
    files, _ = collect_files(str(tmp_path), json_cap=CAP)
    assert "consts/__init__.py" in [entry["file"] for entry in files["custom_code"]]
