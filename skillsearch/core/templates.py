"""Flow-template resolution (design section 5): validate values, apply defaults, substitute placeholders.

Resolution is all or nothing: every problem is collected into one ``VALIDATION_ERROR`` and no partially
substituted step list is ever returned. Nothing here executes a step.

Substitution rules:
- a string that is exactly ``{param}`` (to its last character) takes the value with its JSON type;
- substitution is one pass: a value holding ``{other}`` or ``{{`` is put in as written;
- argument names (object keys) are literal, never substituted;
- any other string gets the value's text (booleans as ``true``/``false``) in place of each ``{param}``;
- ``{{`` and ``}}`` are literal braces;
- an optional parameter with no value and no default removes an argument that is exactly ``{param}``
  (the tool's own default applies) and becomes the empty string inside a longer string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillsearch.core.domain import MAX_NESTING, PLACEHOLDER, FlowStep, Parameter
from skillsearch.core.errors import SkillInvalidError, ValidationError, problem
from skillsearch.core.wellformed import IllFormedError, check_wellformed

__all__ = ["coerce_text_value", "resolve_steps"]

# The whole string, to its last character: ``$`` would also match before a final newline, and ``"{n}\n"``
# would become the bare value, its newline lost and its type changed.
_WHOLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OMIT = object()
# A JSON number: its integer part, then its fraction and exponent (either makes it a non-integer).
_JSON_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _substitute(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _WHOLE.fullmatch(value)
        if whole:
            return values.get(whole.group(1), _OMIT)

        def repl(m: re.Match[str]) -> str:
            if m.group(0) == "{{":
                return "{"
            if m.group(0) == "}}":
                return "}"
            return _as_text(values.get(m.group(1)))

        return PLACEHOLDER.sub(repl, value)
    if isinstance(value, dict):
        out = {k: _substitute(v, values) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _OMIT}
    if isinstance(value, list):
        return [v for v in (_substitute(item, values) for item in value) if v is not _OMIT]
    return value


def _ill_formed(value: Any) -> str | None:
    """Why a value is no JSON value its text could be written from (NaN, a lone surrogate, an integer of
    thousands of digits), said beside the call's other problems rather than alone before them."""
    try:
        check_wellformed(value, "", MAX_NESTING)
    except IllFormedError as exc:
        return exc.reason
    return None


def resolve_steps(
    steps: Sequence[FlowStep],
    parameters: Sequence[Parameter],
    values: Mapping[str, Any],
    known_tools: Iterable[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ordered, substituted steps and the effective parameter values, or one ``ValidationError``."""
    if known_tools is not None:
        known = set(known_tools)
        unknown_tools = sorted({s.tool for s in steps} - known)
        if unknown_tools:
            raise SkillInvalidError(
                f"template names tool(s) this host does not provide: {', '.join(unknown_tools)}; it cannot run"
                " here, so search for another skill",
                {"unknown_tools": unknown_tools},
            )
    by_name = {p.name: p for p in parameters}
    problems: list[dict[str, str]] = []
    for name in sorted(set(values) - set(by_name)):
        problems.append(problem(f"parameters.{name}", f"unknown parameter {name!r}", "unknown"))
    effective: dict[str, Any] = {}
    for p in parameters:
        if p.name in values and values[p.name] is not None:
            wrong = _ill_formed(values[p.name]) or p.problem_with(values[p.name])
            if wrong:
                problems.append(problem(f"parameters.{p.name}", f"{p.name}: {wrong}", "invalid"))
            else:
                effective[p.name] = p.taken(values[p.name])
        elif p.default is not None:
            effective[p.name] = p.taken(p.default)
        elif p.required:
            problems.append(problem(f"parameters.{p.name}", f"missing required parameter {p.name!r}", "missing"))
    if problems:
        summary = "; ".join(x["message"] for x in problems)
        # The names it does take, so a caller that guessed one (``revision`` for ``to_revision``) can fix
        # every problem in its next call without reading the template again.
        names = [p.name for p in parameters]
        takes = f" (this template takes: {', '.join(names)})" if names else " (this template takes no parameters)"
        raise ValidationError(f"invalid parameters: {summary}{takes}", {"problems": problems, "parameters": names})
    resolved = [{"tool": s.tool, "args": _substitute(s.args, effective)} for s in steps]
    return resolved, effective


def coerce_text_value(parameter: Parameter | None, text: str) -> Any:
    """Turn a command-line ``NAME=VALUE`` text into the parameter's type, leaving it as text if it will
    not parse so that resolution reports the type problem.

    A number is read as JSON reads it, so the command line resolves to what MCP and HTTP give for the same
    value: ``5`` is the integer 5 for a ``number`` parameter too (``float()`` made it 5.0, which a step
    wrote as ``5.0``), ``5.0`` is the integer 5 for an ``integer`` parameter (JSON Schema's reading, as MCP and
    HTTP take it), and Python's own extras (``1_000``, ``nan``, ``infinity``) are not numbers."""
    if parameter is None or parameter.type == "string":
        return text
    if parameter.type in ("integer", "number"):
        number = _JSON_NUMBER.fullmatch(text.strip())
        if number is None:
            return text
        if not number.group(2) and not number.group(3):
            try:
                return int(number.group(1))
            except ValueError:  # over Python's 4,300 digits
                return text
        value = parameter.taken(float(number.group(0)))
        # ``5.5`` for an integer stays text: the command line says "'5.5' is not a whole number" of it.
        return text if parameter.type == "integer" and not isinstance(value, int) else value
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text
