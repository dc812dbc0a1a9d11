"""The examples people run first are tests: every search the README shows (and the search page's example)
returns the skill the docs name, with the real models and the default encoder (``minilm+e5``).

The README is parsed: each ``skillsearch ... search "QUERY" ...`` line of its shell blocks is run with its
own options (``--grant``, ``--mode``, ``--kind``, ``--limit``) through the CLI's parser and the catalog's
search. A line with ``--data-dir /tmp/demo`` belongs to the sync walk-through, so it runs on the starter pack
synced from the reference upstream as that walk-through does; every other line on the sample catalog. A new
example without an expected skill here, or an expectation whose example left the README, fails.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from syncsupport import config_for, serve, upstream_with_starter

from skillsearch.cli.main import build_parser
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.settings import Settings
from skillsearch.core.views import WEAK_CONFIDENCE
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.routes_page import SAMPLE_EXAMPLES
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.upstream.app import create_upstream_app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
WALKTHROUGH_DIR = "/tmp/demo"  # the sync walk-through's data directory

# The top skill each example's request must get (the query, as the README writes it).
EXPECTED = {
    "which commit broke the build?": "git-bisect-regressions",
    "障害": "write-postmortem",
    "canary deploy": "deploy-service-canary",
    "find the commit that broke it": "git-bisect-regressions",
    "renew an expired TLS certificate": "tls-certificate-renewal",
    "証明書の期限が切れたので更新したい": "tls-certificate-renewal",
    # the search page's first-screen examples (``http/routes_page.SAMPLE_EXAMPLES``)
    "profile slow python code": "python-profiling",
    "clean a messy dataset with pandas": "pandas-data-cleaning",
    "detect drift in model features": "feature-drift-detection",
    "cut a tagged release": "cut-release-tag",
}

_COMMAND = re.compile(r"skillsearch\s+(.*?\bsearch\s+(?:\"[^\"]+\"|'[^']+').*?)(?:\s+#.*)?$")


def readme_examples() -> list[list[str]]:
    """The arguments of every ``skillsearch ... search "QUERY"`` line in the README's shell blocks."""
    out: list[list[str]] = []
    in_block = False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_block = line.strip() in ("```sh", "```bash", "```shell")
            continue
        match = _COMMAND.search(line) if in_block else None
        if match:
            out.append(shlex.split(match.group(1)))
    return out


def page_examples() -> list[str]:
    """The requests the search page offers as examples on its first screen of the sample catalog."""
    return list(SAMPLE_EXAMPLES)


@pytest.fixture(scope="session")
def synced_starter(tmp_path_factory: pytest.TempPathFactory, routed: RoutedEncoder) -> Iterator[Catalog]:
    """The README's sync walk-through: the starter pack (skills and flows) synced from the reference upstream
    into an empty data directory with the default encoder."""
    catalog = Catalog(Settings(data_dir=tmp_path_factory.mktemp("demo") / "data", seed_sample=False), encoder=routed)
    with serve(create_upstream_app(upstream_with_starter("starter-pack"))) as url:
        [report] = catalog.subscriptions.sync_once(config_for(url, "starter-pack"))
    assert report.error is None
    yield catalog
    catalog.close()


def test_every_readme_and_page_example_has_an_expected_skill() -> None:
    queries = [args[args.index("search") + 1] for args in readme_examples()] + page_examples()
    assert len(queries) >= 6
    assert set(queries) == set(EXPECTED), "an example was added to or removed from the docs: update EXPECTED"


def _request(args: list[str]) -> tuple[SearchRequest, Principal, bool]:
    parsed = build_parser().parse_args(args)
    grants = parsed.grant or []
    principal = (Principal(name="cli", grants=frozenset(grants), scopes=frozenset({SCOPE_MEMORY_READ})) if grants
                 else Principal.operator())
    request = SearchRequest(parsed.query, limit=parsed.limit, mode=parsed.mode, kind=parsed.kind,
                            tags=tuple(parsed.tag or ()))
    return request, principal, parsed.data_dir == WALKTHROUGH_DIR


@pytest.mark.parametrize("args", readme_examples(), ids=lambda a: a[a.index("search") + 1])
def test_readme_example_returns_the_skill_it_shows(
    args: list[str], default_sample: Catalog, synced_starter: Catalog
) -> None:
    request, principal, walkthrough = _request(args)
    result = (synced_starter if walkthrough else default_sample).search(principal, request)
    assert not result.no_match and result.notice is None
    slugs = [h.skill.slug for h in result.hits]
    assert slugs and slugs[0] == EXPECTED[request.query], slugs


@pytest.mark.parametrize("query", page_examples())
def test_search_page_example_returns_the_skill_it_suggests(query: str, default_sample: Catalog) -> None:
    """As the page runs it: the demo token's caller (not every grant), whose first hit is the skill the
    example names and confident enough that the page shows no "Weak match" line above it."""
    demo = PrincipalRegistry(None, demo=True).authenticate(DEMO_TOKEN)
    result = default_sample.search(demo, SearchRequest(query, limit=5))
    assert not result.no_match and result.hits[0].skill.slug == EXPECTED[query]
    # Under WEAK_CONFIDENCE the page puts a "Weak match" line above the first hit (test_search_page ties the two).
    assert result.hits[0].confidence is not None and result.hits[0].confidence >= WEAK_CONFIDENCE


@pytest.mark.parametrize("query", ["find the commit that broke it", "which commit broke the build?"])
def test_the_commit_examples_lexical_side_ranks_the_bisect_skill_above_a_french_commit_skill(
    query: str, default_sample: Catalog, synced_starter: Catalog
) -> None:
    # "commit" is rare in names but common in bodies: with a per-field IDF, the name of
    # ``messages-de-commit-conventionnels`` outweighed everything else and led the lexical list (issue 30).
    for catalog in (default_sample, synced_starter):
        result = catalog.search(Principal.operator(), SearchRequest(query, limit=3, mode="lexical"))
        assert result.hits and result.hits[0].skill.slug == "git-bisect-regressions"


def test_the_readme_says_how_to_reach_plain_skillsearch_before_its_first_example_using_it() -> None:
    """``make serve`` leaves the command in ``.venv/bin``, not on ``PATH``: a pasted ``skillsearch ...`` line is
    "command not found" unless the README has said, before the first such line, how to put it there."""
    lines = README.read_text(encoding="utf-8").splitlines()
    activate = next(i for i, line in enumerate(lines) if ". .venv/bin/activate" in line)
    in_block, first_plain = False, None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_block = line.strip() in ("```sh", "```bash", "```shell")
        elif in_block and line.startswith("skillsearch "):
            first_plain = i
            break
    assert first_plain is not None and activate < first_plain
