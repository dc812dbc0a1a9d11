"""The public API is what ``__all__`` says, sorted, and every name in it exists (after httpx's test)."""

from __future__ import annotations

import types

import skillsearch
from skillsearch.core import errors


def test_all_is_sorted_and_complete() -> None:
    assert skillsearch.__all__ == sorted(skillsearch.__all__)
    for name in skillsearch.__all__:
        assert getattr(skillsearch, name).__name__ == name


def test_every_public_name_is_in_all() -> None:
    """httpx's rule: any public name of the package is either a sub-module or listed in ``__all__``, so
    nothing becomes public API by accident (an import left in ``__init__.py``) and nothing listed is lost."""
    public = {name for name in dir(skillsearch)
              if not name.startswith("_") and not isinstance(getattr(skillsearch, name), types.ModuleType)}
    assert public == set(skillsearch.__all__)


def test_every_error_has_a_stable_code_and_a_client_status() -> None:
    classes = [c for c in (getattr(errors, n) for n in errors.__all__) if isinstance(c, type)]
    codes = {c.code for c in classes}
    assert {"VALIDATION_ERROR", "SKILL_NOT_FOUND", "ACCESS_DENIED", "REVISION_PINNING_VIOLATION",
            "INDEX_NOT_READY", "UPSTREAM_UNAVAILABLE", "UNAUTHENTICATED"} <= codes
    for cls in classes:
        assert issubclass(cls, errors.SkillSearchError)
        assert 400 <= cls.http_status < 600
        assert cls("m", {"k": 1}).to_dict() == {"code": cls.code, "message": "m", "details": {"k": 1}}


def test_one_error_body_and_one_validation_shape() -> None:
    exc = errors.SkillNotFoundError("gone", {"skill_id": "x"})
    assert errors.error_body(exc) == {"error": {"code": "SKILL_NOT_FOUND", "message": "gone", "details": {"skill_id": "x"}}}
    invalid = errors.invalid_input([{"loc": ("query", "limit"), "msg": "too big", "input": "secret"}], "bad: ")
    assert invalid.code == "VALIDATION_ERROR" and invalid.message == "bad: query.limit: too big"
    assert invalid.details == {"problems": [{"field": "query.limit", "message": "too big"}]}
