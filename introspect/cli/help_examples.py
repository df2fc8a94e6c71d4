"""The ``Examples:`` block at the end of each command's ``--help`` (click's ``epilog``).

Each block starts with click's ``\\b`` marker, so click prints it as written instead of
re-flowing it (https://github.com/pallets/click/blob/8.1.7/src/click/formatting.py#L73), and
``introspect man`` puts the same lines in the man page's EXAMPLES section. Every line is a
command that runs as written against the demo's layout (``10.1.2.200`` is the docs' example
address, ``gpu1``/``gpu2`` inventory names), with the why after ``#``; tests/cli/test_help_examples.py
parses each one with click and checks that its command and options exist.
"""

from __future__ import annotations

MODEL = "/root/models/Kimi-K2.6"
VENV = "/root/venv_sglang211"


def examples(*lines: str) -> str:
    """An epilog: the heading, then one command per line, kept verbatim by ``\\b``."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


INTROSPECT = examples(
    f"introspect probe --host 10.1.2.200 --model {MODEL} \\",
    f"    --venv {VENV}",
    "introspect health --hosts hosts.yaml            # every host's venvs",
    "introspect models --host 10.1.2.200             # model dirs and HF cache",
    "introspect probe --help                         # one command's options",
)

PROBE = examples(
    f"introspect probe --host 10.1.2.200 --model {MODEL} \\",
    f"    --venv {VENV}",
    "introspect probe -H gpu1 -m moonshotai/Kimi-K2.6 --json -o kimi.json",
    f"introspect probe --model {MODEL} --save-raw kimi.raw.json",
    f"introspect probe --all-hosts --model {MODEL} --parallel 16",
)

PROFILE = examples(
    "introspect profile kimi.raw.json             # from `probe --save-raw`",
    "introspect profile kimi.raw.json --json -o kimi.json",
    "introspect profile --ansible-tree /tmp/model_facts   # ansible --tree",
)

HEALTH = examples(
    "introspect health --hosts hosts.yaml         # every host's venvs",
    f"introspect health --host 10.1.2.200 --venv {VENV}",
    "introspect health --tags serving --prom /var/lib/node_exporter/health.prom",
    "introspect health --json --keep-days 90 > health.json",
)

HISTORY = examples(
    "introspect history                      # the latest 20 runs",
    "introspect history --host gpu1 --limit 5",
    "introspect history --run 42             # every result of run #42",
    "introspect history prune --keep-days 90",
)

HISTORY_PRUNE = examples(
    "introspect history prune --keep-days 90",
    "introspect history prune --keep-days 7 --db /srv/introspect/history.db",
)

PREFLIGHT = examples(
    f"introspect preflight --host 10.1.2.200 --model {MODEL} \\",
    f"    --venv {VENV}",
    f"introspect preflight -H gpu1 -m {MODEL} \\",
    f"    --venv {VENV} --endpoint http://127.0.0.1:30000 \\",
    "    --output-dir /data/out",
    f"introspect preflight --tags datagen -m {MODEL} --json",
)

DIFF = examples(
    "introspect diff gpu1.json gpu2.json          # two saved profiles",
    f"introspect diff --venv {VENV} \\",
    f"    10.1.2.200:{MODEL} gpu2.json",
    "introspect diff --sections tokenizer \\",
    "    gpu1:moonshotai/Kimi-K2.6 gpu2:moonshotai/Kimi-K2.6",
)

PLAN = examples(
    "introspect plan kimi.json                    # the probed host's GPUs",
    "introspect plan kimi.json --gpus 8 --gpu H200",
    "introspect plan kimi.json --gpus 16 --gpu-mem 80GiB --mem-fraction 0.85",
    "introspect plan kimi.json --gpus 8 --gpu H200 --json > plan.json",
)

REPORT = examples(
    "introspect report kimi.json -o kimi.html          # the model page",
    "introspect report kimi.raw.json plan.json -o report.html",
    "introspect report fleet.json --db ~/.local/state/introspect/history.sqlite3 -o fleet.html",
    f"introspect report 10.1.2.200:{MODEL} --venv {VENV} -o kimi.html",
    "introspect report kimi.json --md -o kimi.md        # + kimi_files/*.svg",
)

ENV = examples(
    "introspect env                               # paste into a bug report",
    "introspect env --json > env.json",
)

CACHE = examples(
    "introspect cache info",
    "introspect cache clear                       # the next probes run in full",
)

CACHE_INFO = examples(
    "introspect cache info",
    "introspect cache info --json",
)

CACHE_CLEAR = examples(
    "introspect cache clear",
    "INTROSPECT_CACHE_DIR=/tmp/introspect-cache introspect cache clear",
)

INIT = examples(
    "introspect init                     # from ~/.ssh/config",
    "introspect init --from-ansible inventory.ini",
    "introspect init --ssh-config ./ssh_config --print   # show, write nothing",
    "introspect init --force             # replace the files written before",
)
