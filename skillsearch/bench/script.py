"""The benchmark scripts' entry point (``benchmarks/*.py``): a data root without the dataset, a split without
its qrels or a dataset name that is not there is said in one line, ``error: VALIDATION_ERROR: ...`` with exit
status 1 as ``skillsearch bench`` says it (a file that cannot be read: ``error: <what the system said>``), not
as a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from skillsearch.core.errors import SkillSearchError

__all__ = ["run_script"]


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's ``main`` and exit with its status; our typed errors leave as one line on stderr."""
    try:
        code = main()
    except SkillSearchError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        raise SystemExit(1) from None
    except OSError as exc:  # e.g. the skills set's queries.dev.jsonl under a --data-root that lacks it
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    raise SystemExit(code or 0)
