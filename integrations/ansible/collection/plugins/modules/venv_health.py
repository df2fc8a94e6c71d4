#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: venv_health
short_description: introspect's raw health facts about the host's venvs
description:
  # Every entry is quoted: a plain YAML scalar may not hold ": " (ansible-doc refuses the whole block).
  - "For every venv, introspect's remote C(health) task under the venv's own interpreter (interpreter,
    distributions, each import in a fresh interpreter, free disk, GPUs), and the isolated C(tokenizer)
    task once per listed model (own process group and timeout, killed with its group after it)."
  - "O(venvs) takes the same entries as C(introspect_venvs) in the inventory (and C(venvs:) in
    introspect's hosts.yaml), so C(venvs: \"{{ introspect_venvs }}\") passes them on."
  - "Returns the raw replies under C(ansible_facts.introspect_health); C(introspect health --ansible-tree DIR)
    turns them into introspect's health report, history rows and Prometheus metrics."
  - "In check mode the tokenizer tasks (which run the tokenizer library and possibly the model's own code)
    are skipped."
options:
  venvs:
    description: "Venvs to check, each C({path, requires, imports, models, remote_code, min_free_gb})."
    type: list
    elements: dict
    required: true
  timeout: {description: Seconds for each remote task (default introspect's 120)., type: float}
  import_timeout: {description: Seconds per import (default introspect's 60)., type: float}
  nvidia_smi: {description: Query GPUs with nvidia-smi when it is on PATH., type: bool, default: true}
  parallel: {description: Tasks at once on the host., type: int, default: 4}
author: introspect
"""

EXAMPLES = r"""
- name: Venv health of every host
  introspect.models.venv_health:
    venvs: "{{ introspect_venvs }}"
"""

RETURN = r"""
ansible_facts:
  description: C(introspect_health) with C(venvs) (as given) and C(calls), one record per remote task.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.introspect.models.plugins.module_utils.introspect_runner import (
    defaults,
    facts_document,
    run_many,
    venv_python,
)

VENV_KEYS = ("path", "requires", "imports", "models", "remote_code", "min_free_gb")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venvs=dict(type="list", elements="dict", required=True),
            timeout=dict(type="float"),
            import_timeout=dict(type="float"),
            nvidia_smi=dict(type="bool", default=True),
            parallel=dict(type="int", default=4),
        ),
        supports_check_mode=True,
    )
    p, d = module.params, defaults()
    for i, venv in enumerate(p["venvs"]):
        unknown = sorted(set(venv) - set(VENV_KEYS))
        if not venv.get("path") or unknown:
            module.fail_json(msg="venvs[%d]: %s" % (i, "needs a path" if not venv.get("path") else
                                                    "unknown key %r (allowed: %s)" % (unknown[0], ", ".join(VENV_KEYS))))
    timeout = p["timeout"] or d["tokenizer_timeout"]
    import_timeout = min(p["import_timeout"] or d["import_timeout"], timeout)
    jobs, skipped = [], []
    # Tokenizer loads first: they are the slow ones, so they overlap with the light probes.
    for venv in p["venvs"]:
        for model in dict.fromkeys(venv.get("models") or ()):
            if module.check_mode:
                skipped.append(model)
                continue
            jobs.append((venv_python(venv["path"]), "tokenizer",
                         {"model_path": model, "trust_remote_code": venv.get("remote_code", True) is not False,
                          "sample": False}, timeout, True))
    for venv in p["venvs"]:
        # The model dirs are what fills up; with none listed, the venv's own filesystem.
        disk = list(dict.fromkeys(venv.get("models") or [venv["path"]]))
        jobs.append((venv_python(venv["path"]), "health",
                     {"imports": list(venv.get("imports") or ()), "model_dirs": disk,
                      "import_timeout": import_timeout, "nvidia_smi": p["nvidia_smi"]}, timeout, False))
    records = run_many(jobs, p["parallel"])
    doc = facts_document(records, venvs=p["venvs"], skipped_in_check_mode=skipped)
    module.exit_json(changed=False, ansible_facts={"introspect_health": doc})


if __name__ == "__main__":
    main()
