#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: discover_models
short_description: every model directory on the host, as introspect's discover task finds them
description:
  - Runs introspect's remote C(discover) task (a bounded walk of the roots and the Hugging Face cache)
    and returns its raw reply under C(ansible_facts.introspect_models). Read-only, so check mode runs it too.
options:
  roots: {description: Directories to walk (reported when missing)., type: list, elements: path, default: []}
  optional_roots: {description: Directories skipped quietly when missing., type: list, elements: path, default: []}
  hf_cache: {description: Hugging Face hub cache to read (default the host's)., type: path}
  use_hf_scanner: {description: Use huggingface_hub's cache scanner when the interpreter has it., type: bool, default: true}
  max_depth: {description: Directory levels below each root., type: int}
  max_models: {description: Stop after this many models., type: int}
  venv: {description: Virtualenv whose bin/python runs the task., type: path}
  python: {description: Interpreter when no venv is given (default the module's own)., type: path}
  timeout: {description: Seconds for the walk (default introspect's 60)., type: float}
author: introspect
"""

EXAMPLES = r"""
- introspect.models.discover_models:
    roots: [/models]
"""

RETURN = r"""
ansible_facts:
  description: C(introspect_models) with C(calls), the discover task's record.
  returned: always
  type: dict
"""

import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.introspect.models.plugins.module_utils.introspect_runner import (
    defaults,
    facts_document,
    run_task,
    venv_python,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            roots=dict(type="list", elements="path", default=[]),
            optional_roots=dict(type="list", elements="path", default=[]),
            hf_cache=dict(type="path"),
            use_hf_scanner=dict(type="bool", default=True),
            max_depth=dict(type="int"),
            max_models=dict(type="int"),
            venv=dict(type="path"),
            python=dict(type="path"),
            timeout=dict(type="float"),
        ),
        mutually_exclusive=[("venv", "python")],
        supports_check_mode=True,
    )
    p, d = module.params, defaults()
    python = venv_python(p["venv"]) if p["venv"] else (p["python"] or sys.executable)
    timeout = p["timeout"] or d["discover_deadline"]
    request = {"roots": p["roots"], "optional_roots": p["optional_roots"], "hf_cache": p["hf_cache"],
               "use_hf_scanner": p["use_hf_scanner"], "max_depth": p["max_depth"] or d["discover_depth"],
               "max_models": p["max_models"] or d["discover_max_models"], "deadline": timeout}
    record = run_task(python, "discover", request, timeout)
    module.exit_json(changed=False, ansible_facts={"introspect_models": facts_document([record])})


if __name__ == "__main__":
    main()
