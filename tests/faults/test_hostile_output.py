"""Hostile or broken remote output: reply frames are type-checked member by member and the last
valid one answers (a stale frame a login script prints cannot discard the real reply, a damaged
one is a protocol error, never ``internal error: ValueError``); host-controlled text (model_type,
a special token, the chat template, the model dir's name, the remote interpreter's stderr) is
shown with its control characters escaped, never sent raw to the terminal."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from introspect.cli.safe_text import one_line, safe_console, visible
from introspect.errors import ProtocolError
from introspect.remote.contract import BEGIN, END, PROTOCOL
from introspect.transport import shipping
from introspect.transport.batching import _frames
from tests.cli import terminal
from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.fixtures.kimi_model import CHAT_TEMPLATE
from tests.fixtures.venvs import venv_python

# What a hostile host writes: retitle the terminal (OSC 0 ... BEL), clear it (CSI 2 J), hide
# what follows (SGR 8), overwrite (CR, BS), reorder (U+202E RIGHT-TO-LEFT OVERRIDE).
OSC_TITLE = "\x1b]0;PWNED\x07"
CLEAR = "\x1b[2J"
HIDE = "\x1b[8m"
RLO = "\u202e"
HOSTILE_MODEL_TYPE = f"x{OSC_TITLE}{CLEAR}"
HOSTILE_TOKEN = f"<|start{HIDE}_header{RLO}|>"
HOSTILE_TEMPLATE_TEXT = f"TPL{HIDE}hidden{RLO}"


def frame(body: dict | bytes) -> bytes:
    return BEGIN + (body if isinstance(body, bytes) else json.dumps(body).encode()) + END


GOOD = {"protocol": PROTOCOL, "pid": 7, "facts": {"answer": 42}, "errors": [], "seconds": 0.5,
        "python": {"version": [3, 11, 7], "executable": "/usr/bin/python3"}, "probe_version": "0"}
# A member of the wrong type (or a frame that is no reply at all) -> what the error names.
DAMAGED = {
    "seconds-a-string": ({**GOOD, "seconds": "soon"}, "'seconds' is a string, not a number"),
    "seconds-a-bool": ({**GOOD, "seconds": True}, "'seconds' is true/false"),
    "errors-a-string": ({**GOOD, "errors": "boom"}, "'errors' is a string"),
    "error-record-a-number": ({**GOOD, "errors": [1]}, "'errors[0]' is an integer, not an object"),
    "error-type-a-list": ({**GOOD, "errors": [{"type": ["x"], "message": "m"}]}, "'errors[0].type' is a list"),
    "facts-a-list": ({**GOOD, "facts": [1, 2]}, "'facts' is a list, not an object or null"),
    "key-a-list": ({**GOOD, "key": [0]}, "'key' is a list"),
    "python-version-text": ({**GOOD, "python": {"version": "3.11"}}, "'python.version' is '3.11'"),
    "pid-a-float": ({**GOOD, "pid": 1.5}, "'pid' is a number, not an integer"),
    "stopped-a-string": ({**GOOD, "stopped": "yes"}, "'stopped' is a string"),
    "fatal-a-string": ({**GOOD, "fatal": "old"}, "'fatal' is a string"),
    "protocol-a-string": ({**GOOD, "protocol": str(PROTOCOL)}, "speaks protocol '1'"),
    "older-protocol": ({**GOOD, "protocol": 0}, "speaks protocol 0"),
    "not-an-object": ([GOOD], "the reply is a list, not a JSON object"),
    "not-json": (b"{'protocol': 1}", "not valid JSON"),
}


# -- frames, unit level --------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_frame_alone_is_a_protocol_error_naming_the_member(case):
    body, needle = DAMAGED[case]
    with pytest.raises(ProtocolError) as info:
        shipping.parse_reply(b"motd\n" + frame(body))
    assert needle in info.value.message, info.value.message
    assert info.value.hint and info.value.hint.startswith("#"), info.value.hint
    replies, problem = _frames(frame(body))
    assert replies == {} and isinstance(problem, ProtocolError) and needle in problem.message


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_frame_beside_the_real_reply_is_skipped(case):
    body, _needle = DAMAGED[case]
    real = frame(GOOD)
    for stdout in (frame(body) + real, real + frame(body), b"banner " + BEGIN + frame(body) + real):
        assert shipping.parse_reply(stdout) == GOOD
    replies, problem = _frames(frame(body) + frame({**GOOD, "key": 0}) + frame({**GOOD, "key": 1}))
    assert problem is None and sorted(replies) == [0, 1]


def test_a_stale_frame_before_a_batch_never_discards_its_replies():
    stale_fatal = frame({"protocol": PROTOCOL, "fatal": {"type": "python-too-old", "version": "3.6.9"}})
    stale_keyless = frame({**GOOD, "stopped": True})
    stale_key0 = frame({**GOOD, "key": 0, "facts": {"answer": "stale"}})
    real = frame({**GOOD, "key": 0}) + frame({**GOOD, "key": 1})
    for stale in (stale_fatal, stale_keyless, stale_key0):
        replies, problem = _frames(stale + real)
        assert problem is None and sorted(replies) == [0, 1], stale
        assert replies[0]["facts"] == {"answer": 42} and not replies[0].get("stopped")
    # A too-old interpreter writes its fatal frame last (and alone): still every task's answer.
    replies, problem = _frames(b"noise" + stale_fatal)
    assert problem is None and list(replies) == [None]


def test_a_reply_cut_short_after_a_stale_frame_is_a_truncation_not_the_stale_frame():
    assert shipping.parse_reply(frame(GOOD) + BEGIN + b'{"protocol": 1, "fac') is None


def test_markers_sharing_a_newline_never_misread():
    shared = BEGIN + END[1:]  # "...BEGIN>>>\n<<<INTROSPECT:END>>>\n": an empty frame
    assert shipping.parse_reply(shared + frame(GOOD)) == GOOD


# -- escaping, unit level ------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "shown"), [
    (OSC_TITLE, "\\x1b]0;PWNED\\x07"), (CLEAR, "\\x1b[2J"), ("a\rb\bc\x7f", "a\\x0db\\x08c\\x7f"),
    ("\x9b31m", "\\x9b31m"), (RLO + "exe.txt", "\\u202eexe.txt"), ("\u2066x\u2069", "\\u2066x\\u2069"),
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"), ("zw\u200bj\ufeff", "zw\\u200bj\\ufeff"),
    ("bad\udcffbyte", "bad\\udcffbyte"), ("tag\U000e0001", "tag\\U000e0001"),
])
def test_control_and_format_characters_are_shown_escaped(raw, shown):
    assert visible(raw) == shown
    assert one_line(raw) == shown


def test_printable_text_layout_and_other_scripts_are_untouched():
    text = "Kimi–K2 中文 é ñ ‑ 🙂 [bold]x[/] \\x1b\n\tindented"
    assert visible(text) == text
    assert one_line("a\nb\tc") == "a\\x0ab\\x09c"  # an error: line stays one line


def test_the_console_escapes_data_but_keeps_its_own_styling():
    from rich.table import Table
    from rich.text import Text

    out = io.StringIO()
    console = safe_console(file=out, force_terminal=True, color_system="standard", width=60,
                           highlight=False, emoji=False)
    table = Table("name", "value")
    table.add_row("[bold]model type[/]", HOSTILE_MODEL_TYPE)  # a str cell: escaped before layout
    table.add_row("token", Text(HOSTILE_TOKEN))  # a Text built directly: escaped when rendered
    console.print(table)
    console.print(f"[red]{CLEAR}[/red]")
    printed = out.getvalue()
    assert "\x1b[1m" in printed and "\x1b[31m" in printed  # rich's own styles still reach the terminal
    for raw in (OSC_TITLE, CLEAR, HIDE, "\x07", RLO):
        assert raw not in printed, (raw, printed)
    assert "x\\x1b]0;PWNED\\x07\\x1b[2J" in printed  # laid out at its escaped width, whole
    # A Text was measured before the net escaped it: it may be cut at its column, but stays inert.
    assert "<|start\\x1b[8m_header" in printed


# -- end to end ----------------------------------------------------------------------------------

def _wrapper(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


@pytest.mark.ssh
@pytest.mark.parametrize("stale", ["older-protocol", "fatal", "wrong-types", "not-json"])
def test_a_stale_frame_from_a_login_script_does_not_discard_the_real_reply(sshd, client_keys, kimi_model,
                                                                          venv_full, tmp_path, stale):
    body = {"older-protocol": {"protocol": 0, "facts": {}},
            "fatal": {"protocol": PROTOCOL, "fatal": {"type": "python-too-old", "version": "3.6.9"}},
            "wrong-types": {**GOOD, "seconds": "soon", "errors": "x", "key": [0]},
            "not-json": b"{oops"}[stale]
    (tmp_path / "stale.out").write_bytes(b"Welcome to gpu-7\n" + frame(body))
    python = _wrapper(tmp_path / "python", f"cat {tmp_path / 'stale.out'}\nexec {venv_python(venv_full)} \"$@\"\n")
    # Every session the probe starts prints the stale frame first. One case takes the whole default
    # batch (the model-code witness too), one the files and tokenizer tasks (a batch: frames keyed
    # per task), and two the files task alone: one task is one session without a batch, so its
    # reply is read by the single-reply parser (shipping.parse_reply) end to end, and the tokenizer
    # load (~2 CPU-s) is paid in two cases, not four.
    tasks = {"fatal": (), "older-protocol": ("--no-model-code",)}.get(stale, ("--no-model-code", "--no-tokenizer"))
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--python", str(python),
                     "--json", *tasks, timeout=180)
    assert result.code == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    profile = result.json()
    assert profile["architecture"]["num_layers"] == 61
    # The real reply's file facts came through whatever ran; the load's verdict where it ran.
    assert profile["tokenizer"]["bos"] == {"token": "[BOS]", "id": 163584}, profile["tokenizer"]
    if "--no-tokenizer" not in tasks:
        assert profile["tokenizer"]["loaded"] is True, profile["tokenizer"].get("error")


@pytest.mark.ssh
def test_only_damaged_frames_is_a_protocol_error_not_an_internal_error(sshd, client_keys, kimi_model, tmp_path):
    (tmp_path / "damaged.out").write_bytes(frame({**GOOD, "seconds": "soon", "key": 0}))
    python = _wrapper(tmp_path / "python", f"cat {tmp_path / 'damaged.out'}\nexit 0\n")
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--python", str(python),
                     timeout=120)
    assert_clean_error(result, 1, "'seconds' is a string, not a number")
    assert "internal error" not in result.stderr and "ValueError" not in result.stderr
    fix = next(line for line in result.stderr.splitlines() if line.startswith("fix: "))
    assert fix.startswith("fix: # "), fix  # prose goes in a comment: the line pastes harmlessly


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory: pytest.TempPathFactory, kimi_model: Path) -> Path:
    """The Kimi fixture in a dir whose name carries OSC and RLO, with model_type, a special token
    and the chat template's text carrying escape sequences."""
    model = tmp_path_factory.mktemp("hostile") / f"Kimi{OSC_TITLE}-{RLO}K2"
    shutil.copytree(kimi_model, model)
    config = json.loads((model / "config.json").read_text())
    config["model_type"] = HOSTILE_MODEL_TYPE
    (model / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        doc = json.loads((model / name).read_text())
        for entry in (doc.get("added_tokens_decoder") or {}).values():
            if entry["content"] == "<|start_header_id|>":
                entry["content"] = HOSTILE_TOKEN
        if "additional_special_tokens" in doc:
            doc["additional_special_tokens"] = [HOSTILE_TOKEN if t == "<|start_header_id|>" else t
                                                for t in doc["additional_special_tokens"]]
        (model / name).write_text(json.dumps(doc))
    (model / "chat_template.jinja").write_text(HOSTILE_TEMPLATE_TEXT + CHAT_TEMPLATE, encoding="utf-8")
    return model


def _assert_inert(out: str, *shown: str) -> None:
    """No hostile sequence reached the terminal; each of ``shown`` is there, escaped."""
    for raw in (OSC_TITLE, "\x1b]", CLEAR, HIDE, "\x07", "\x08", RLO):
        assert raw not in out, (raw, out[-3000:])
    for needle in shown:
        assert needle in out, (needle, out[-3000:])


@pytest.mark.ssh
def test_host_text_in_the_report_is_escaped_in_a_real_terminal(sshd, client_keys, hostile_model, venv_full,
                                                              monkeypatch):
    # The terminal runner strips rich's colours before returning; here every byte must stay.
    monkeypatch.setattr(terminal, "ANSI", re.compile(r"(?!)"))
    code, out = terminal.run_in_terminal("probe", *ssh_flags(sshd, client_keys), "--model", str(hostile_model),
                                         "--venv", str(venv_full), "--wide", columns=120, timeout=180)
    assert code in (0, 1), out[-3000:]
    assert "\x1b[1m" in out  # a colour terminal: rich's own styling is there, so the check below is real
    _assert_inert(out, "x\\x1b]0;PWNED\\x07\\x1b[2J",  # model_type
                  "<|start\\x1b[8m_header\\u202e|>",  # the special token
                  "TPL\\x1b[8mhidden\\u202e",  # the chat template's sample
                  "Kimi\\x1b]0;PWNED\\x07-\\u202eK2")  # the model dir's name


def test_host_text_in_the_error_line_is_escaped(venv_full, tmp_path):
    missing = tmp_path / f"gone{OSC_TITLE}{CLEAR}{RLO}"
    result = run_cli("probe", "--model", str(missing), "--venv", str(venv_full))
    assert_clean_error(result, 2, "gone\\x1b]0;PWNED\\x07\\x1b[2J\\u202e")
    _assert_inert(result.stderr + result.stdout)
    assert "\x1b" not in result.stderr + result.stdout  # not a terminal: no styling either


@pytest.mark.ssh
def test_remote_stderr_in_the_error_line_is_escaped(sshd, client_keys, kimi_model, tmp_path):
    # An interpreter that dies before the probe runs, its last stderr line (quoted in the error)
    # carrying escape sequences: a sitecustomize or a login script the host controls.
    python = _wrapper(tmp_path / "python", "printf 'Fatal Python error: init_import_site: boom "
                      "\\033]0;PWNED\\007\\033[2J\\342\\200\\256evil\\033[8mhidden\\n' >&2\nexit 1\n")
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--python", str(python),
                     timeout=120)
    assert_clean_error(result, 1, "without a reply", "boom \\x1b]0;PWNED\\x07\\x1b[2J\\u202eevil\\x1b[8mhidden")
    _assert_inert(result.stderr + result.stdout)
    assert "\x1b" not in result.stderr + result.stdout


def test_host_text_in_a_diff_is_escaped(tmp_path):
    from tests.models.test_diff import TEMPLATE, profile

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(profile()))
    changed = profile()
    changed["architecture"]["model_type"] = HOSTILE_MODEL_TYPE
    changed["tokenizer"]["chat_template"].update(sha256="b" * 64, text=HOSTILE_TEMPLATE_TEXT + TEMPLATE)
    b.write_text(json.dumps(changed))
    result = run_cli("diff", str(a), str(b), cwd=tmp_path)
    assert result.code == 1, result.stderr[-2000:]
    _assert_inert(result.stdout + result.stderr, "x\\x1b]0;PWNED\\x07\\x1b[2J", "+TPL\\x1b[8mhidden\\u202e")
    assert "\x1b" not in result.stdout + result.stderr


def test_a_model_dir_name_in_the_models_listing_is_escaped(hostile_model, monkeypatch):
    monkeypatch.setattr(terminal, "ANSI", re.compile(r"(?!)"))  # every byte the terminal got
    code, out = terminal.run_in_terminal("models", "--roots", str(hostile_model.parent), columns=200, timeout=120)
    assert code in (0, 1), out[-3000:]
    _assert_inert(out, "Kimi\\x1b]0;PWNED\\x07-\\u202eK2", "x\\x1b]0;PWNED\\x07\\x1b[2J")
