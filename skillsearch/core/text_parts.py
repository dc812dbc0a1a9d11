"""A skill's instructions read a part at a time: ``get_skill``'s ``offset`` and ``max_chars``.

One rule for MCP, HTTP and the CLI. Offsets and lengths count characters (Python ``str`` code points), so a
part never splits a character's UTF-8 bytes or, once JSON escapes it, a UTF-16 surrogate pair. A cut part
ends after the last line break of the second half of its window when there is one (a reader gets whole
lines), else after its last space or tab there (a long line is cut between words), else before any
combining mark or joiner that would start the next part. Reading from ``offset`` 0,
passing each answer's ``next_offset`` back until it is null, gives the parts that join to the whole
instructions, character for character. ``recall_cloud_skill``'s Level 1 cuts its instructions by this rule
too, at its byte cap, and answers with the same fields (``usecases/recall.py``).
"""

from __future__ import annotations

import unicodedata

from skillsearch.core.errors import ValidationError, problem
from skillsearch.core.views import SkillDetail

__all__ = ["instructions_part", "offset_problem", "text_part"]

# A part does not end right before these: each belongs with the character before it.
_JOINERS = frozenset("\u200c\u200d\ufe0e\ufe0f")


def offset_problem(offset: object) -> dict[str, str] | None:
    """The problem with an ``offset`` that is not a whole number of 0 or more (``None`` when it is one): the
    one check of ``get_skill``'s and ``recall_cloud_skill``'s ``offset``."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return problem("offset", "offset must be a whole number, 0 or more")
    return None


def text_part(text: str, offset: int = 0, max_chars: int | None = None) -> tuple[str, int | None]:
    """``(part, next_offset)``: ``text`` from ``offset``, at most ``max_chars`` characters of it (``None``:
    to the end); ``next_offset`` is where the rest starts, ``None`` when the part reaches the end.
    A bad ``offset`` or ``max_chars`` is a :class:`ValidationError` naming it."""
    problems = []
    bad = offset_problem(offset)
    if bad is not None:
        problems.append(bad)
    elif offset > len(text):
        problems.append(problem("offset", f"offset {offset} is past the end of the instructions"
                                          f" ({len(text)} characters)"))
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1):
        problems.append(problem("max_chars", "max_chars must be a whole number, 1 or more"))
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    if max_chars is None or len(text) - offset <= max_chars:
        return text[offset:], None
    end = offset + max_chars
    half = offset + max_chars // 2
    line_end = text.rfind("\n", half, end)
    space = line_end if line_end >= 0 else max(text.rfind(" ", half, end), text.rfind("\t", half, end))
    if space >= 0:
        end = space + 1
    else:
        while end > offset + 1 and (unicodedata.combining(text[end]) or text[end] in _JOINERS
                                    or (text[end] == "\n" and text[end - 1] == "\r")):
            end -= 1
    return text[offset:end], end


def instructions_part(detail: SkillDetail, offset: int = 0, max_chars: int | None = None) -> SkillDetail:
    """``detail`` with its instructions cut to the part ``offset``/``max_chars`` name, and the fields a
    reader needs to read on: ``instructions_truncated``, ``instructions_chars`` (the whole length),
    ``instructions_offset`` and ``next_offset``. Unchanged when the part is the whole."""
    whole = detail.instructions or ""
    part, next_offset = text_part(whole, offset, max_chars)
    if offset == 0 and next_offset is None:
        return detail
    return detail.model_copy(update={
        "instructions": part, "instructions_truncated": True, "instructions_offset": offset,
        "next_offset": next_offset,
    })
