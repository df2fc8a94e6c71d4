"""``introspect plan`` and ``introspect.plan()`` read a saved profile as its typed document.

The profile file is JSON from outside (any introspect version, maybe hand-edited): it is validated
into ``ProfileDocument`` once (cli/cmd_plan.py ``profile_document``) and the planner reads typed
sections from there. A file that does not fit ``introspect.profile/v1`` is one ``error:`` line naming
the first key that does not fit, and a ``fix:`` line, never a traceback or a plan made from a value
the schema refuses (a quoted layer count used to plan as "no layer count").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from introspect.cli.cmd_plan import profile_document
from introspect.errors import InputError
from tests.conftest import assert_clean_error, run_cli
from tests.golden.cases import GOLDEN

PROFILE = GOLDEN / "profiles" / "raw-kimi-k25-int4-8shards.json"


def _damaged(tmp_path: Path) -> Path:
    profile = json.loads(PROFILE.read_text())
    profile["architecture"]["num_layers"] = "61"  # quoted: not the schema's integer
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(profile))
    return path


def test_a_profile_that_does_not_fit_its_schema_is_one_error_naming_the_key(tmp_path: Path) -> None:
    path = _damaged(tmp_path)
    result = run_cli("plan", str(path), "--gpus", "8", "--gpu", "H200")
    assert_clean_error(result, 2, f"{path} does not fit introspect.profile/v1: architecture.num_layers")
    fix = [line for line in result.stderr.splitlines() if line.startswith("fix: ")]
    assert fix == ["fix: introspect probe --model DIR --output PROFILE.json  # probe again"]
    assert result.stdout == ""  # no plan printed from the damaged section


def test_the_api_refuses_the_same_profile_given_as_a_dict(tmp_path: Path) -> None:
    from introspect import plan

    damaged = json.loads(_damaged(tmp_path).read_text())
    with pytest.raises(InputError, match="architecture.num_layers"):
        plan(damaged, gpus=8, gpu="H200")
    # The undamaged profile plans as the CLI does: TP8 fits 8 H200s (tests/engines/test_plan_docs.py).
    assert plan(json.loads(PROFILE.read_text()), gpus=8, gpu="H200").best == "TP8"


def test_a_typed_document_is_taken_as_it_is() -> None:
    document = profile_document(json.loads(PROFILE.read_text()), "saved")
    assert profile_document(document) is document
    assert document.architecture.speculative.drafter_plan is not None
    assert document.architecture.speculative.drafter_plan.dflash.target_layer_ids == [1, 15, 30, 44, 58]
