"""Grant keys as people type them: the one check of every grant given as input (the CLI's ``--grant`` on
every command, ``import``, ``sources add``, ``token add``, ``mcp``, the principals file), so each refuses
the same values with the same words. A value without a kind (``starter-pack``) is the usual slip: the
message suggests the key it probably meant."""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillsearch.core.domain import GRANT_PATTERN
from skillsearch.core.errors import ValidationError, problem

__all__ = ["ALL_GRANTS", "GRANT_FORMS", "check_grants", "grant_problem"]

GRANT_FORMS = "sub:<id>, team:<id> or user:<id>"
ALL_GRANTS = "*"  # every grant: principals file and ``token add`` only
_BARE_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def grant_problem(value: object, *, allow_all: bool = False) -> str | None:
    """Why ``value`` is not a grant key, or ``None`` when it is one (``*`` too, with ``allow_all``)."""
    if isinstance(value, str) and (GRANT_PATTERN.match(value) or (allow_all and value == ALL_GRANTS)):
        return None
    forms = GRANT_FORMS.replace(" or ", ", ") + " or * (every grant)" if allow_all else GRANT_FORMS
    text = f"invalid grant {value!r}: use {forms}"
    if isinstance(value, str) and _BARE_ID.match(value):
        text += f" (did you mean sub:{value}?)"
    return text


def check_grants(values: Iterable[object], *, field: str = "grant", allow_all: bool = False) -> list[str]:
    """The grants, each once and in order, or one ``VALIDATION_ERROR`` listing every invalid one."""
    given = list(values)
    problems = [problem(field, text) for v in given if (text := grant_problem(v, allow_all=allow_all))]
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    return list(dict.fromkeys(str(v) for v in given))
