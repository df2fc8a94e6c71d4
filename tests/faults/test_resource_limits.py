"""The probe's own memory and output bounds on the host: a chat template that doubles a string or
a list stops at its render budget, a tokenizer file of 1 GiB is never read whole, an allocation
past the task's address-space limit is named with the limit, a flooding child is cut off, and a
tiktoken rank of 10**4000 makes the file invalid instead of a vocab size. Each case keeps the
rest of the profile."""

from __future__ import annotations

import base64
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from introspect.remote.facts.tokenizer.tiktoken import (
    MAX_RANK,
    summarize_tiktoken_file,
    summarize_tiktoken_lines,
)
from introspect.remote.limits import GIB, LimitExceeded, apply, budget, size_text
from introspect.remote.supervisor import OUTPUT_CAP, STDERR_TAIL
from tests.conftest import REPO, SESSION_TMP
from tests.faults.conftest import tokenizer_model
from tests.fixtures.kimi_model import NUM_RANKS, VOCAB_SIZE

# The templates of the finding: each step doubles what the last one made (a namespace, since a
# plain {% set %} inside a loop is scoped to one iteration).
DOUBLING = {
    "string": "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
              "{% endfor %}{{ ns.s }}",
    "list": "{% set ns = namespace(l=['x']) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}"
            "{% endfor %}{{ ns.l|length }}",
}
# An outer address-space cap on the whole run, far above the render budget: when our budget
# fires, the finding names it; without it, this cap would end the render with a bare MemoryError.
OUTER_AS = 6 * GIB


def _copy(kimi_model: Path, tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    return model


def _probe(model: Path, venv: Path, tmp_path: Path, *extra: str, outer_as: int | None = None,
           timeout: float = 180) -> tuple[dict, dict, float]:
    """(profile, raw facts, seconds) of a local probe, under an outer address-space cap if given."""
    raw_file = tmp_path / "raw.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), TMPDIR=str(SESSION_TMP / "tmp"),
               INTROSPECT_CACHE_DIR=str(tmp_path / "cache"))

    def cap() -> None:
        if outer_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (outer_as, outer_as))

    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "introspect.cli.main", "probe", "--model", str(model),
                           "--venv", str(venv), "--json", "--no-model-code", "--save-raw", str(raw_file), *extra],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path, preexec_fn=cap)
    seconds = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    return json.loads(proc.stdout), json.loads(raw_file.read_text()), seconds


def _findings(profile: dict, code: str) -> list[str]:
    return [f["message"] for f in profile["findings"] if f["code"] == code]


@pytest.mark.parametrize("kind", sorted(DOUBLING))
def test_doubling_template_stops_at_its_render_budget(kind, kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    (model / "chat_template.jinja").write_text(DOUBLING[kind])
    profile, raw, seconds = _probe(model, venv_full, tmp_path, outer_as=OUTER_AS)
    runaway = _findings(profile, "chat-template-runaway")
    assert runaway and "exceeded its 512 MiB memory budget" in runaway[0], profile["findings"]
    assert seconds < 120
    # The rest of the profile is the loaded tokenizer's, not lost with the render.
    assert profile["tokenizer"]["loaded"] is True and profile["tokenizer"]["vocab_size"] == VOCAB_SIZE
    assert profile["architecture"]["num_layers"] == 61
    # The task's peak resident set (the kernel's, over the whole reaped task tree) stayed near
    # the budget, far below the outer cap.
    supervisor = raw["resources"]["tokenizer"]
    assert supervisor["limits"]["memory"] == OUTER_AS  # the tighter outer cap stays in force
    assert 0 < supervisor["peak_rss"] < 1.5 * GIB, supervisor


def test_allocation_past_the_memory_limit_names_the_limit(kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "model", "self.hoard = bytearray(3 << 30)", pidfile)
    profile, raw, _ = _probe(model, venv_full, tmp_path, "--memory-limit", "1GiB")
    named = _findings(profile, "tokenizer-memory-limit")
    assert named and "exceeded its 1 GiB memory limit (address space)" in named[0], profile["findings"]
    assert raw["resources"]["tokenizer"]["peak_rss"] < 1 * GIB  # refused, never touched
    assert profile["tokenizer"]["vocab_size"] == VOCAB_SIZE  # from the files
    fix = [f["fix"] for f in profile["findings"] if f["code"] == "tokenizer-memory-limit"][0]
    assert fix.startswith("introspect probe --model ") and "--memory-limit 32GiB" in fix


def test_sparse_1gib_tokenizer_json_is_not_read_whole(kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    # A fast tokenizer, so that transformers would read tokenizer.json: whole, 1.1 GB resident.
    config = json.loads((model / "tokenizer_config.json").read_text())
    config.pop("auto_map", None)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    with open(model / "tokenizer.json", "wb") as fh:
        fh.truncate(1 << 30)  # sparse: costs no disk
    profile, raw, seconds = _probe(model, venv_full, tmp_path)
    assert seconds < 90
    named = _findings(profile, "tokenizer-file-too-large")
    assert named and "tokenizer.json is 1 GiB, above its 64 MiB cap" in named[0], profile["findings"]
    assert any("tokenizer.json" in m for m in _findings(profile, "tokenizer_files-too-large"))
    assert raw["resources"]["tokenizer"]["peak_rss"] < 512 << 20  # the import of transformers, no more
    assert profile["tokenizer"]["vocab_size"] == NUM_RANKS  # tiktoken.model still read


def test_tiktoken_rank_of_4000_digits_makes_the_file_invalid(kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    with open(model / "tiktoken.model", "ab") as fh:
        fh.write(base64.b64encode(b"\xff\xfe runaway") + b" 1" + b"0" * 4000 + b"\n")
    profile, _raw, _ = _probe(model, venv_full, tmp_path, "--no-tokenizer")
    invalid = _findings(profile, "tiktoken-invalid")
    assert invalid and "rank has 4001 digits" in invalid[0] and f"line {NUM_RANKS + 1}" in invalid[0], invalid
    assert profile["tokenizer"]["vocab_size"] == VOCAB_SIZE


# -- the pieces, without a probe --------------------------------------------------------------

def test_rank_bounds_agree_on_both_paths(tmp_path):
    good = b"YQ== 0\nYg== 1\n"
    for rank in (str(MAX_RANK + 1).encode(), b"9" * 11, b"1" + b"0" * 4000):
        path = tmp_path / "t.tiktoken"
        path.write_bytes(good + b"Yw== " + rank + b"\n")
        whole, err = summarize_tiktoken_file(str(path))
        assert err is None and whole is not None
        lines = summarize_tiktoken_lines(io.BytesIO(path.read_bytes()))
        assert whole["malformed_lines"] == lines["malformed_lines"] == 1
        assert whole["max_rank"] == lines["max_rank"] == 1
    path.write_bytes(good + b"Yw== %d\n" % MAX_RANK)
    whole, _ = summarize_tiktoken_file(str(path))
    assert whole is not None and whole["max_rank"] == MAX_RANK and whole["malformed_lines"] == 0


def test_render_budget_stops_a_loop_and_restores_the_limit():
    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(LimitExceeded) as caught, budget("the loop", seconds=0.5):
        while True:
            pass
    assert caught.value.cause == "time-limit" and "0.5 s time budget" in str(caught.value)
    with pytest.raises(LimitExceeded) as caught, budget("the growth", memory=64 << 20):
        grown = [b"x" * (1 << 20) for _ in range(1024)]
        del grown
    assert caught.value.cause == "memory-limit" and "64 MiB memory budget" in str(caught.value)
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_limits_applied_in_a_child_are_named():
    code = ("from introspect.remote.limits import apply, memory_message\n"
            "print(apply({'memory': 512 << 20, 'file_size': 1 << 20}))\n"
            "try:\n    bytearray(1 << 30)\nexcept MemoryError:\n    print(memory_message('the probe'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    assert "'memory': 536870912" in out and "'file_size': 1048576" in out
    assert "the probe exceeded its 512 MiB memory limit (address space)" in out
    assert apply(None) == {} and size_text(3 << 29) == "1.5 GiB"


# The supervisor's wait kills and reaps every descendant of its process (it is a subreaper), so
# it runs in an interpreter of its own, as on a host: in the test process it would reap the
# suite's own sshd servers too.
SUPERVISOR_SIDE = """
import json, subprocess, sys
from introspect.remote.supervisor import _Child
flood = "import sys\\nwhile True:\\n    sys.stdout.buffer.write(b'x' * 65536); sys.stderr.write('e' * 65536)\\n"
proc = subprocess.Popen([sys.executable, "-c", flood], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)
child = _Child(proc)
child.wait(60)
print(json.dumps({"overflow": bool(child.overflow), "returncode": proc.returncode,
                  "out": len(child.output("out")), "err": len(child.output("err"))}))
"""


def test_child_flooding_its_output_is_cut_off():
    done = subprocess.run([sys.executable, "-c", SUPERVISOR_SIDE], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["overflow"] and seen["returncode"] is not None and seen["returncode"] < 0
    assert seen["out"] <= OUTPUT_CAP and seen["err"] <= STDERR_TAIL
