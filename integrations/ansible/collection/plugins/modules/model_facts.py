#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: model_facts
short_description: introspect's raw facts about one model directory
description:
  # Every entry is quoted: a plain YAML scalar may not hold ": " (ansible-doc refuses the whole block).
  - "Runs introspect's remote C(model) task (config, tokenizer files, safetensors headers,
    drafters, environment, engines, GPUs) under the given interpreter and, when asked,
    the isolated C(tokenizer) task (its own process group, killed with it after O(tokenizer_timeout))
    and the isolated C(model_code) task (the model built from its code on the meta device: no weights read)."
  - "Returns the raw replies under C(ansible_facts.introspect_model); C(introspect profile --ansible-tree DIR)
    turns them into the same profile as C(introspect probe)."
  - "The task code is introspect's own remote package, embedded when the collection is built."
  - "In check mode the tokenizer and model-code tasks (which run libraries and possibly the model's own code)
    are skipped; the file task reads only."
options:
  model:
    description: "Model directory on the host (C(--model) of C(introspect probe)); C(model_path) is an alias."
    type: path
    required: true
    aliases: [model_path]
  venv: {description: Virtualenv whose bin/python runs the tasks., type: path}
  python: {description: Interpreter running the tasks when no venv is given (default the module's own)., type: path}
  tokenizer: {description: Also load the tokenizer in an isolated child., type: bool, default: false}
  model_code: {description: Also build the model from its code on the meta device (needs torch there)., type: bool, default: false}
  trust_remote_code: {description: Let the tokenizer load and the model-code build run the model's own code., type: bool, default: true}
  timeout: {description: Seconds for the file task (default introspect's 60)., type: float}
  tokenizer_timeout: {description: Seconds for the tokenizer load (default introspect's 120)., type: float}
  model_code_timeout: {description: Seconds for the model-code build (default introspect's 180)., type: float}
  json_cap: {description: Refuse JSON files above this many bytes., type: int}
  max_header: {description: Refuse safetensors headers above this many bytes., type: int}
author: introspect
"""

EXAMPLES = r"""
- name: Model facts, tokenizer included
  introspect.models.model_facts:
    model: /models/Kimi-K2.6
    venv: /opt/venvs/serve
    tokenizer: true
"""

RETURN = r"""
ansible_facts:
  description: C(introspect_model) with C(calls), one record per remote task (request, framed reply, exit status).
  returned: always
  type: dict
"""

import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.introspect.models.plugins.module_utils.introspect_runner import (
    defaults,
    facts_document,
    run_many,
    venv_python,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model=dict(type="path", required=True, aliases=["model_path"]),
            venv=dict(type="path"),
            python=dict(type="path"),
            tokenizer=dict(type="bool", default=False),
            model_code=dict(type="bool", default=False),
            trust_remote_code=dict(type="bool", default=True),
            timeout=dict(type="float"),
            tokenizer_timeout=dict(type="float"),
            model_code_timeout=dict(type="float"),
            json_cap=dict(type="int"),
            max_header=dict(type="int"),
        ),
        mutually_exclusive=[("venv", "python")],
        supports_check_mode=True,
    )
    p, d = module.params, defaults()
    python = venv_python(p["venv"]) if p["venv"] else (p["python"] or sys.executable)
    files_timeout = p["timeout"] or d["files_timeout"]
    jobs = [(python, "model", {"model_path": p["model"], "json_cap": p["json_cap"] or d["json_cap"],
                               "max_header": p["max_header"] or d["max_header"], "deadline": files_timeout},
             files_timeout, False)]
    skipped = []
    if p["tokenizer"] and module.check_mode:
        skipped.append("tokenizer")
    elif p["tokenizer"]:
        jobs.append((python, "tokenizer", {"model_path": p["model"], "sample": True,
                                           "trust_remote_code": p["trust_remote_code"]},
                     p["tokenizer_timeout"] or d["tokenizer_timeout"], True))
    if p["model_code"] and module.check_mode:
        skipped.append("model_code")
    elif p["model_code"]:
        jobs.append((python, "model_code", {"model_path": p["model"], "trust_remote_code": p["trust_remote_code"]},
                     p["model_code_timeout"] or d["model_code_timeout"], True))
    records = run_many(jobs, len(jobs))
    doc = facts_document(records, target={"python": python, "venv": p["venv"], "model_path": p["model"]},
                         options={"remote_code": p["trust_remote_code"], "load_tokenizer": p["tokenizer"],
                                  "load_model_code": p["model_code"]},
                         skipped_in_check_mode=skipped)
    module.exit_json(changed=False, ansible_facts={"introspect_model": doc})


if __name__ == "__main__":
    main()
