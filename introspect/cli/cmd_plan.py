"""``introspect plan``: the memory / parallelism plan of a saved profile, offline.

Also home of ``--emit-drafter-config`` (used by ``probe`` too): a DFlash or EAGLE-3
drafter config.json derived from the target, in the conventions of one engine
(``--engine``; default: the engine the probe found on the host).
"""

from __future__ import annotations

import shlex

import click
from pydantic import ValidationError

from introspect.analysis.result import PROFILE_SCHEMA
from introspect.analysis.serving.drafter_config import choose_engine, drafter_config, plan_drafter
from introspect.analysis.serving.drafter_plan import reshape_dflash
from introspect.analysis.serving.engine_conventions import ENGINES
from introspect.analysis.serving.plan import DEFAULT_FRACTION, GpuBudget
from introspect.analysis.serving.plan_context import KV_DTYPES, ContextOptions
from introspect.analysis.serving.section import replan
from introspect.cli import help_examples
from introspect.cli.gpu_mem import gpu_by_name, parse_gpu_mem
from introspect.cli.outcome import Finished, Notice
from introspect.cli.session import session
from introspect.client.documents import read_document
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import DrafterPlan
from introspect.documents.profile_serving import Plan, PlanDrafter
from introspect.errors import EXIT_FINDINGS, InputError, UsageError
from introspect.remote.contract import JSONObject

PLAN_SCHEMA = "introspect.plan/v1"
DRAFTER_KINDS = ("dflash", "eagle3")


def read_profile(path: str) -> ProfileDocument:
    data = read_document(path, PROFILE_SCHEMA, what="an introspect profile",
                         hint="pass a file written by `introspect probe --output` (or --json)")
    return profile_document(data, path)


def profile_document(profile: ProfileDocument | JSONObject, where: str = "the profile") -> ProfileDocument:
    """A profile as its typed document: one given as JSON (a saved file, as read) is validated here, and
    one that does not fit ``introspect.profile/v1`` is an :class:`InputError` naming the first key."""
    if isinstance(profile, ProfileDocument):
        return profile
    try:
        return ProfileDocument.model_validate(profile)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "the document"
        raise InputError(f"{where} does not fit introspect.profile/v1: {at}: {first['msg']}",
                         hint="introspect probe --model DIR --output PROFILE.json  # probe again") from None


class DraftShape:
    """--engine, --draft-taps, --draft-layers and --block-size as given (None: the plan's default)."""

    def __init__(self, engine: str | None = None, taps: int | None = None, layers: int | None = None,
                 block_size: int | None = None) -> None:
        self.engine, self.taps, self.layers, self.block_size = engine, taps, layers, block_size


def drafter_plan_of(profile: ProfileDocument, shape: DraftShape) -> DrafterPlan | None:
    """The profile's drafter plan reshaped for --draft-taps / --draft-layers / --block-size; None without one."""
    plan = profile.architecture.speculative.drafter_plan
    if plan is None:
        return None
    dflash = plan.dflash
    taps = shape.taps or dflash.draft_taps or len(dflash.target_layer_ids)
    try:
        dflash = reshape_dflash(dflash, taps, shape.layers or dflash.draft_layers,
                                shape.block_size or dflash.block_size)
    except ValueError as exc:
        most = (dflash.num_target_layers or 0) - 3
        context = click.get_current_context(silent=True)
        profile_file = context.params.get("profile_file") if context else None
        hint = (f"introspect plan {shlex.quote(str(profile_file))} --draft-taps {min(5, most)}" if profile_file
                else f"# pass --draft-taps {min(5, most)} or fewer (at most {most} for this target)")
        raise UsageError(f"--draft-taps {taps}: {exc}", hint=hint) from None
    return plan.model_copy(update={"dflash": dflash})


def drafter_member(profile: ProfileDocument, shape: DraftShape) -> tuple[DrafterPlan | None, PlanDrafter | None]:
    """(the reshaped drafter plan, the plan's ``drafter`` member in the chosen engine's terms)."""
    plan = drafter_plan_of(profile, shape)
    if plan is None:
        return None, None
    conv, why = choose_engine(profile.engines, shape.engine)
    return plan, plan_drafter(plan, conv, why)


def drafter_file(profile: ProfileDocument, kind: str, shape: DraftShape) -> JSONObject:
    """The drafter's config.json (drafter_config.py: free-form by nature, the target's RoPE values as read)."""
    plan, member = drafter_member(profile, shape)
    if plan is None or member is None:
        raise InputError("the profile has no drafter plan (its layer count is unknown)",
                         hint="probe a model directory whose config.json gives num_hidden_layers")
    if not plan.target_fields:
        raise InputError("the profile's drafter plan predates the target fields a drafter config needs",
                         hint="introspect probe --model DIR --output profile.json  # probe again")
    archs = profile.architecture.architectures
    return drafter_config(plan, kind, archs[0] if archs else None, member)


def write_drafter_config(profile: ProfileDocument | JSONObject, kind: str, path: str,
                         shape: DraftShape | None = None) -> None:
    """``--emit-drafter-config``: ``profile`` is the typed document, or the JSON ``probe`` just built."""
    from introspect.cli.cmd_probe import write_json

    config = drafter_file(profile_document(profile), kind, shape or DraftShape())
    write_json(path, config)
    click.echo(f"wrote a {kind} drafter config for {config['introspect']['engine']} to {path}", err=True)


@click.command("plan", epilog=help_examples.PLAN)
@click.argument("profile_file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--gpus", type=click.IntRange(1, 1024), help="GPU count (default: the probed host's).")
@click.option("--nodes", type=click.IntRange(1, 128), help="Nodes of --gpus-per-node GPUs each: layouts may span "
              "them (TP within a node and PP across nodes first, as vLLM's guide advises; TP across nodes next).")
@click.option("--gpus-per-node", type=click.IntRange(1, 64), help="GPUs in each node (with --nodes).")
@click.option("--gpu-mem", metavar="SIZE", help="Memory of one GPU: 141GB (decimal, as vendors state it: 131.3 GiB), "
              "131GiB, or 143771MiB (as nvidia-smi prints it); a bare number is refused (default: the probed host's).")
@click.option("--gpu", "gpu_name", metavar="NAME", help="Take the memory from nvidia-smi's total for NAME: "
              "H100, H200, A100-80GB, A100-40GB.")
@click.option("--mem-fraction", type=click.FloatRange(0.05, 1.0), default=DEFAULT_FRACTION, show_default=True,
              help="Share of GPU memory for weights and KV cache (SGLang --mem-fraction-static).")
@click.option("--max-model-len", type=click.IntRange(1, 2**31), metavar="TOKENS",
              help="Context every layout must hold one request of, as the engines check at start "
              "(default: the model's, as vLLM derives it from config.json).")
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="auto", show_default=True,
              help="KV cache dtype: auto = the model's (bf16 for fp8 or fp32 checkpoints), fp8 = 1 byte an element.")
@click.option("--context-len", type=click.IntRange(1, 2**31), metavar="TOKENS",
              help="Also count the concurrent requests of this length.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan section as JSON.")
@click.option("--emit-drafter-config", "emit", nargs=2, type=(click.Choice(DRAFTER_KINDS), click.Path(dir_okay=False)),
              help="Write a DFlash or EAGLE-3 drafter config.json for --engine: KIND FILE.")
@click.option("--engine", type=click.Choice(ENGINES), help="Engine whose layer-id conventions and flags the "
              "drafter lines and config follow (default: the one the probe found on the host; SGLang's otherwise).")
@click.option("--draft-taps", type=click.IntRange(1, 64), help="DFlash target layers tapped (default 5, as the "
              "published drafters).")
@click.option("--draft-layers", type=click.IntRange(1, 64), help="DFlash drafter depth (default 5).")
@click.option("--block-size", type=click.IntRange(2, 64), help="DFlash block size (default 16, SGLang's).")
def plan(profile_file: str, gpus: int | None, nodes: int | None, gpus_per_node: int | None,
         gpu_mem: str | None, gpu_name: str | None, mem_fraction: float,
         max_model_len: int | None, kv_dtype: str, context_len: int | None,
         as_json: bool, emit: tuple[str, str] | None, engine: str | None, draft_taps: int | None,
         draft_layers: int | None, block_size: int | None) -> Finished:
    """Which TP / EP / PP layouts fit, with how much KV cache, from a saved profile."""
    profile = read_profile(profile_file)
    probed = profile.plan.gpus
    command = f"introspect plan {shlex.quote(profile_file)} --gpus {gpus or 'N'}"
    if gpu_mem and gpu_name:
        raise UsageError("--gpu and --gpu-mem both give the GPU's memory", hint=f"{command} --gpu {shlex.quote(gpu_name)}")
    name, memory = (gpu_by_name(gpu_name, command) if gpu_name
                    else (None, parse_gpu_mem(gpu_mem, command) if gpu_mem else 0))
    gpus, per_node = _node_gpus(gpus, nodes, gpus_per_node, command)
    if (gpus is None or not memory) and probed is None:
        raise UsageError("the profile has no GPU facts", hint=f"{command} --gpu-mem 96GiB  # or --gpu H200")
    budget = GpuBudget(count=gpus or (probed.count if probed else 0),
                       memory_bytes=memory or (probed.memory_bytes if probed else 0),
                       name=name if memory else (probed.name if probed else None),
                       source="flags" if gpus or memory else str(probed.source if probed else None), per_node=per_node)
    shape = DraftShape(engine, draft_taps, draft_layers, block_size)
    plan = replan(profile, budget, mem_fraction, ContextOptions(max_model_len, kv_dtype, context_len))
    member = drafter_member(profile, shape)[1]  # the plan's drafter member when the profile has a drafter plan
    if member is not None:
        plan.drafter = member
    if emit:
        write_drafter_config(profile, emit[0], emit[1], shape)
    if as_json:
        from introspect.cli.jsonout import echo_json

        echo_json(plan.to_dict(), PLAN_SCHEMA)
    elif not session().quiet:
        from introspect.cli.render_serving import plan_section
        from introspect.cli.render_term import make_console

        # A word wider than the terminal stays whole.
        make_console().print(plan_section(plan, profile.architecture.speculative.drafter_plan, profile.engines),
                             crop=False)
    if plan.best is None:
        return Finished(EXIT_FINDINGS, (Notice(str(plan.reason), _no_fit_fix(plan), kind="NoLayoutFits"),))
    return Finished(0)


def _node_gpus(gpus: int | None, nodes: int | None, per_node: int | None, command: str
               ) -> tuple[int | None, int | None]:
    """(GPU count, GPUs per node) from --gpus or --nodes x --gpus-per-node."""
    if nodes is None and per_node is None:
        return gpus, None
    if nodes is None or per_node is None:
        raise UsageError("--nodes and --gpus-per-node go together",
                         hint=f"{command.replace(' --gpus N', '')} --nodes 2 --gpus-per-node 8 --gpu H200")
    if gpus is not None and gpus != nodes * per_node:
        raise UsageError(f"--gpus {gpus} is not --nodes {nodes} x --gpus-per-node {per_node}",
                         hint=f"{command.split(' --gpus')[0]} --nodes {nodes} --gpus-per-node {per_node}"
                              "  # --gpus is then implied")
    return nodes * per_node, per_node


def _no_fit_fix(plan: Plan) -> str:
    """A shorter context where one layout holds the weights but not one request, else more memory."""
    fix = plan.context_fix
    if fix is None or not fix.max_model_len:
        return "add GPUs, use GPUs with more memory, or a smaller (more quantized) checkpoint"
    params = click.get_current_context().params
    flags = [("--gpus", params.get("gpus")), ("--nodes", params.get("nodes")),
             ("--gpus-per-node", params.get("gpus_per_node")),
             ("--gpu-mem", params.get("gpu_mem")), ("--gpu", params.get("gpu_name")),
             ("--mem-fraction", params.get("mem_fraction") if params.get("mem_fraction") != DEFAULT_FRACTION else None),
             ("--kv-dtype", params.get("kv_dtype") if params.get("kv_dtype") != "auto" else None)]
    words = [shlex.quote(str(params.get("profile_file")))] + [f"{flag} {shlex.quote(str(value))}"
                                                             for flag, value in flags if value is not None]
    return (f"introspect plan {' '.join(words)} --max-model-len {fix.max_model_len}"
            "  # or add GPUs; --kv-dtype fp8 halves the KV")
