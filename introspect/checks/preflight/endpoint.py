"""The ``endpoint`` check: the OpenAI-compatible server serves this model and answers."""

from __future__ import annotations

import shlex

from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    Check,
    comment,
    no_evidence,
    section,
)
from introspect.remote.contract import EndpointFacts, HttpCall, PreflightReply, as_dict


def check_endpoint(evidence: PreflightReply, model_path: str) -> Check:
    info, err = section(evidence.get("endpoint"))
    if info is None:
        return no_evidence("endpoint", evidence, "the endpoint", err)
    if info.get("skipped"):
        return Check("endpoint", "warn", {"url": None}, comment("pass --endpoint http://127.0.0.1:PORT (the "
                     "server's address as seen from the host)"), "not checked: no --endpoint given")
    models, completion = shaped(info.get("models"), HttpCall), shaped(info.get("completion"), HttpCall)
    matched = as_dict(info.get("matched")) or None
    out = {"url": info.get("url"), "api_key_env": info.get("api_key_env"),
           "api_key_present": info.get("api_key_present"), "models": models, "matched": matched,
           "completion": completion or None}
    if not models.get("ok"):
        return Check("endpoint", "fail", out, _endpoint_fix(info, models),
                     f"GET {info.get('url')}/v1/models from the host failed: {as_dict(models.get('error')).get('message')}")
    if matched is None:
        return Check("endpoint", "fail", out,
                     comment(f"serve {model_path} at this endpoint (e.g. --model-path {shlex.quote(model_path)}), "
                             "or point --endpoint at the server that does"),
                     f"the server lists {models.get('ids') or 'no models'} (roots {models.get('roots')}); none is "
                     f"{model_path}")
    if not completion.get("ok"):
        return Check("endpoint", "fail", out, _endpoint_fix(info, completion),
                     f"a one-token chat completion for {matched.get('id')} failed: "
                     f"{as_dict(completion.get('error')).get('message')}")
    return Check("endpoint", "pass", out, None,
                 f"serves {matched.get('id')} (matched by {matched.get('by')}); /v1/models in "
                 f"{models.get('seconds')} s, one-token completion in {completion.get('seconds')} s")


def _endpoint_fix(info: EndpointFacts, call: HttpCall) -> str:
    error = as_dict(call.get("error"))
    status = call.get("status")
    if status in (401, 403):
        name = info.get("api_key_env")
        if name and not info.get("api_key_present"):
            # KEY stands for the server's --api-key value: a placeholder that parses as shell, unlike <key>.
            return f"export {name}=KEY  # in the host's environment, where it is not set: the server's --api-key value"
        if name:
            return comment(f"the key in {name} is refused: put the server's --api-key value in it")
        return comment("the server wants an API key: pass --api-key-env NAME naming a variable set on the host")
    if error.get("type") == "timeout":
        return comment("the server did not answer in time: check that it finished loading, or raise "
                       "--endpoint-timeout")
    if error.get("type") == "unreachable":
        return comment(f"start the server, or fix --endpoint: nothing answers at {info.get('url')} from the host "
                       "(it is usually bound to the host's loopback)")
    if status == 404:
        return comment("the URL does not serve the OpenAI API: pass the server's base URL (http://HOST:PORT)")
    return comment("check the server's log for this request")
