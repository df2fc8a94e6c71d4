"""Many profiles in, one hosts x facts matrix out, the odd values marked. Pure: no I/O.

Each row is one host (or saved profile); each column one fact that should be the same
across a fleet serving one model: model type, parameters, quantization, the versions of
transformers, tiktoken, torch and the engines, the chat template, the tokenizer class and
whether AutoTokenizer itself loads it, the GPUs. Per column the value most rows hold is
normal and every other value is odd; when no value is held by more rows than any other
(two hosts, two values) there is no majority and every value is odd. A cell whose fact
is unknown (a config-only profile has no versions; a saved profile has no free disk) is
never odd and never counted: unknown is not a difference.

Free disk differs between any two hosts, so it is never judged by the majority: with a
threshold (``min_free``) a host below it is odd, else the column is shown as it is.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

from introspect.analysis.tokenizer.autotokenizer_verdict import autotokenizer_loaded
from introspect.documents.compare import Column as ColumnDocument
from introspect.documents.compare import CompareCounts, CompareDocument, Row
from introspect.remote.contract import JSONObject, as_dict

COMPARE_SCHEMA: Final = "introspect.compare/v1"


class CellJSON(TypedDict):
    value: Any  # the fact's JSON value
    known: bool
    reason: str | None


@dataclass(frozen=True)
class Cell:
    """One fact of one row: ``value`` (None is a value when ``known``: not installed, no template),
    or unknown with the ``reason``."""

    value: Any = None
    known: bool = True
    reason: str | None = None

    def to_json(self) -> CellJSON:
        return {"value": self.value, "known": self.known, "reason": self.reason}


def unknown(reason: str) -> Cell:
    return Cell(None, False, reason)


@dataclass
class RowInput:
    """What one row is made of: a profile, or why there is none (``error``).

    Each part is JSON as a saved document holds it (a profile file, raw facts, a fleet document
    of any introspect version) or as a live probe returned it: read with ``as_dict``, never trusted."""

    label: str
    source: str  # "file" or "live"
    profile: JSONObject | None
    file: str | None = None
    exit_code: int = 0
    error: JSONObject | None = None  # {type, message, hint, host?, stage?}
    tokenizer_result: JSONObject | None = None  # the raw tokenizer task result, when there is one
    disk: JSONObject | None = None  # {"path", "free_bytes", "total_bytes", "reason"} of a live host


@dataclass(frozen=True)
class Fact:
    key: str
    title: str
    kind: str  # how a value is shown: "text", "count", "bytes", "sha", "bool"
    read: Callable[[RowInput], Cell]
    judged: bool = True  # by the majority; free disk is judged by a threshold instead


def _arch(row: RowInput) -> JSONObject:
    return as_dict(as_dict(row.profile).get("architecture"))


def _model_type(row: RowInput) -> Cell:
    value = _arch(row).get("model_type")
    return Cell(value) if isinstance(value, str) else unknown("config.json names no model_type")


def _params(row: RowInput) -> Cell:
    params = as_dict(_arch(row).get("params"))
    total = params.get("total")
    if isinstance(total, int) and not isinstance(total, bool):
        return Cell(total)
    return unknown(str(params.get("why") or "no witness counted the parameters"))


def _quantization(row: RowInput) -> Cell:
    quant = as_dict(_arch(row).get("quantization"))
    if not quant:  # the checkpoint declares none: its dtype is what it holds
        dtype = _arch(row).get("dtype")
        return Cell(f"none ({dtype})" if isinstance(dtype, str) else "none")
    parts = [str(quant.get("method") or "?")]
    if quant.get("bits") is not None:
        kind = {"int": "int", "float": "fp"}.get(str(quant.get("type")))
        parts.append(f"{kind}{quant['bits']}" if kind else f"{quant['bits']}bit")
    if quant.get("group_size") is not None:
        parts.append(f"g{quant['group_size']}")
    if quant.get("format"):
        parts.append(str(quant["format"]))
    return Cell(" ".join(parts))


def _package(name: str) -> Callable[[RowInput], Cell]:
    def read(row: RowInput) -> Cell:
        packages = as_dict(as_dict(as_dict(row.profile).get("environment")).get("packages"))
        if name not in packages:  # the environment was not probed (a config-only profile)
            return unknown("the environment was not probed")
        return Cell(packages[name])  # None: not installed, a value of its own

    return read


def _template(row: RowInput) -> Cell:
    template = as_dict(as_dict(as_dict(row.profile).get("tokenizer")).get("chat_template"))
    if not template:
        return unknown("no tokenizer section")
    sha = template.get("sha256")
    return Cell(sha if isinstance(sha, str) else None)  # None: no chat template


def _tokenizer_class(row: RowInput) -> Cell:
    tokenizer = as_dict(as_dict(row.profile).get("tokenizer"))
    value = tokenizer.get("class") or tokenizer.get("declared_class")
    return Cell(value) if isinstance(value, str) else unknown("neither the load nor the files named a class")


def _autotokenizer(row: RowInput) -> Cell:
    """Did ``AutoTokenizer.from_pretrained`` itself load it? The profile's own verdict when it
    has one, else the raw task result, else what the profile's tokenizer section implies: a
    load by the layout's own library (tiktoken, sentencepiece) is AutoTokenizer failing."""
    tokenizer = as_dict(as_dict(row.profile).get("tokenizer"))
    verdict = as_dict(tokenizer.get("autotokenizer"))
    if "ok" in verdict and (verdict["ok"] is None or isinstance(verdict["ok"], bool)):
        return Cell(verdict["ok"]) if verdict["ok"] is not None else unknown(str(verdict.get("reason") or
                                                                                 "no tokenizer load ran"))
    loaded = autotokenizer_loaded(row.tokenizer_result)
    if loaded is not None:
        return Cell(loaded)
    if tokenizer.get("loaded"):
        return Cell(tokenizer.get("source") == "transformers")
    if tokenizer.get("error"):
        return Cell(False)
    return unknown("no tokenizer load ran (--no-tokenizer, or a config-only profile)")


def _disk(row: RowInput) -> Cell:
    disk = as_dict(row.disk) or as_dict(as_dict(row.profile).get("disk"))
    free = disk.get("free_bytes")
    if isinstance(free, int) and not isinstance(free, bool):
        return Cell(free)
    if disk.get("reason"):
        return unknown(str(disk["reason"]))
    return unknown("not in a saved profile: compare live hosts to measure it")


def _gpus(row: RowInput) -> Cell:
    gpus = as_dict(as_dict(row.profile).get("gpus"))
    if not gpus.get("probed"):
        return unknown("the GPUs were not probed")
    models = as_dict(gpus.get("models"))
    if not gpus.get("available") or not models:
        return Cell(None)  # no GPU (nvidia-smi absent or saw none)
    return Cell(", ".join(f"{count} x {name}" for name, count in sorted(models.items())))


FACTS: tuple[Fact, ...] = (
    Fact("model_type", "model type", "text", _model_type),
    Fact("params", "params", "count", _params),
    Fact("quantization", "quantization", "text", _quantization),
    Fact("transformers", "transformers", "text", _package("transformers")),
    Fact("tiktoken", "tiktoken", "text", _package("tiktoken")),
    Fact("torch", "torch", "text", _package("torch")),
    Fact("sglang", "sglang", "text", _package("sglang")),
    Fact("vllm", "vllm", "text", _package("vllm")),
    Fact("chat_template", "chat template", "sha", _template),
    Fact("tokenizer_class", "tokenizer class", "text", _tokenizer_class),
    Fact("autotokenizer", "AutoTokenizer", "bool", _autotokenizer),
    Fact("free_disk", "free disk", "bytes", _disk, judged=False),
    Fact("gpus", "GPUs", "text", _gpus),
)
FACT_KEYS = tuple(fact.key for fact in FACTS)


@dataclass
class Column:
    fact: Fact
    majority: Any = None
    majority_rows: int = 0
    distinct: int = 0  # distinct known values
    known_rows: int = 0  # compared rows that know this fact
    odd: list[str] = field(default_factory=list)  # labels of the rows whose value is odd

    @property
    def differs(self) -> bool:
        return bool(self.odd)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def judge(fact: Fact, cells: Sequence[tuple[str, Cell]], min_free: int | None) -> Column:
    """The column of ``fact`` over the rows' ``(label, cell)``: its majority and its odd rows."""
    known = [(label, cell) for label, cell in cells if cell.known]
    counts = Counter(_key(cell.value) for _label, cell in known)
    column = Column(fact, distinct=len(counts), known_rows=len(known))
    if not fact.judged:
        if min_free is not None:
            column.odd = [label for label, cell in known if isinstance(cell.value, int) and cell.value < min_free]
        return column
    ranked = counts.most_common()
    if len(ranked) == 1 or (len(ranked) > 1 and ranked[0][1] > ranked[1][1]):
        majority = ranked[0][0]
        column.majority = json.loads(majority)
        column.majority_rows = ranked[0][1]
        column.odd = [label for label, cell in known if _key(cell.value) != majority]
    elif ranked:  # a tie: no value is normal, so every one is marked
        column.odd = [label for label, _cell in known]
    return column


def compare_document(rows: Sequence[RowInput], *, min_free: int | None = None) -> CompareDocument:
    """The ``introspect.compare/v1`` document (without its stamp) of ``rows``. A row with an
    ``error`` (unreachable, no profile) is listed with it and takes no part in the judging."""
    cells = {row.label: {fact.key: (fact.read(row) if row.error is None else unknown("no profile"))
                         for fact in FACTS} for row in rows}
    compared = [row for row in rows if row.error is None]
    columns = [judge(fact, [(row.label, cells[row.label][fact.key]) for row in compared], min_free)
               for fact in FACTS]
    odd_by_row = {row.label: [c.fact.key for c in columns if row.label in c.odd] for row in rows}
    differing = [c.fact.key for c in columns if c.differs]
    return CompareDocument(
        schema=COMPARE_SCHEMA,
        differs=bool(differing),
        differing=differing,
        counts=CompareCounts(rows=len(rows), compared=len(compared), errors=len(rows) - len(compared)),
        min_free_bytes=min_free,
        columns=[ColumnDocument(key=c.fact.key, title=c.fact.title, kind=c.fact.kind, judged=c.fact.judged,
                                majority=c.majority, majority_rows=c.majority_rows, distinct=c.distinct,
                                known_rows=c.known_rows, differs=c.differs, odd=c.odd) for c in columns],
        rows=[_row(row, cells[row.label], odd_by_row[row.label]) for row in rows],
    )


def compare_rows(rows: Sequence[RowInput], *, min_free: int | None = None) -> dict[str, Any]:
    """:func:`compare_document` as the JSON object ``introspect compare --json`` prints (the CLI
    adds ``model`` and stamps it)."""
    return compare_document(rows, min_free=min_free).to_dict()


def _row(row: RowInput, cells: Mapping[str, Cell], odd: list[str]) -> Row:
    target = as_dict(as_dict(row.profile).get("target"))
    return Row(label=row.label, source=row.source, file=row.file, host=target.get("host"),
               model_path=target.get("model_path"), exit_code=row.exit_code, error=row.error,
               facts={key: cell.to_json() for key, cell in cells.items()}, odd=odd)


__all__ = ["COMPARE_SCHEMA", "FACTS", "FACT_KEYS", "Cell", "Column", "Fact", "RowInput", "compare_document",
           "compare_rows", "judge"]
