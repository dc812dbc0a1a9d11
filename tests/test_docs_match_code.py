"""The README's tables of limits and environment variables, read as a newcomer reads them, against the code
that applies them (issue 32: the README said 64 MiB where the code refused at 256 MiB). A row that names a
variable the code does not read, or a default the code does not use, fails here."""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from skillsearch.core.limits import Limits
from skillsearch.core.settings import NOT_FROM_ENV, Settings
from skillsearch.retrieval.batching import default_layout
from skillsearch.retrieval.writelock import DEFAULT_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
VARIABLE = re.compile(r"`(SKILLSEARCH_[A-Z0-9_]+)`")
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "s": 1}


def table_rows(header: str) -> list[list[str]]:
    """The cells of each row of every README table whose header row starts with ``header``."""
    lines = README.splitlines()
    rows = []
    for start in (i for i, line in enumerate(lines) if line.startswith(header)):
        for line in lines[start + 2:]:
            if not line.startswith("|"):
                break
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"no README table starts with {header!r}"
    return rows


def amount(text: str) -> float:
    """``1 MiB`` -> 1048576, ``5000`` -> 5000, ``300 s`` -> 300."""
    number, _, unit = text.partition(" ")
    return float(number.replace(",", "")) * UNITS.get(unit, 1)


def read_in_code() -> set[str]:
    """Every SKILLSEARCH_ variable the package reads: the settings and limits fields, and each name that
    appears in the source (os.environ reads, the documented ones of the benchmarks)."""
    names = {f"SKILLSEARCH_{f.name.upper()}" for f in (*fields(Settings), *fields(Limits))}
    for path in (ROOT / "skillsearch").rglob("*.py"):
        names |= set(re.findall(r"SKILLSEARCH_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    return names


def test_the_limits_table_states_the_limits_the_code_applies() -> None:
    rows = table_rows("| limit | default | set with | when exceeded |")
    by_variable = {m.group(1): row[1] for row in rows if (m := VARIABLE.search(row[2]))}
    limits = {f"SKILLSEARCH_{f.name.upper()}": getattr(Limits(), f.name) for f in fields(Limits)}
    assert set(limits) <= set(by_variable), f"limits missing from the README table: {set(limits) - set(by_variable)}"
    for variable, default in limits.items():
        assert amount(by_variable[variable]) == default, (variable, by_variable[variable], default)
    assert amount(by_variable["SKILLSEARCH_WRITE_LOCK_TIMEOUT_S"]) == DEFAULT_TIMEOUT_S


def test_the_environment_table_states_the_defaults_the_code_uses() -> None:
    rows = table_rows("| variable | default | what |")
    settings = Settings()
    computed = {"encoder_threads": default_layout(0, 0, cpus=1)[1]}  # 0 in Settings: picked at run time
    checked = 0
    for row in rows:
        variables = VARIABLE.findall(row[0])
        literals = re.findall(r"`([^`]+)`", row[1])
        for variable, literal in zip(variables, literals, strict=False):
            name = variable.removeprefix("SKILLSEARCH_").lower()
            assert hasattr(settings, name), f"{variable} is not a setting"
            value = computed.get(name, getattr(settings, name))
            expected = str(int(value)) if isinstance(value, (bool, float)) and float(value).is_integer() else str(value)
            assert literal == expected, (variable, literal, value)
            checked += 1
    assert checked >= 6


def test_every_variable_the_readme_names_is_read_by_the_code() -> None:
    unknown = set(re.findall(r"SKILLSEARCH_[A-Z0-9_]+", README)) - read_in_code()
    assert not unknown, f"the README names variables nothing reads: {sorted(unknown)}"


# Set by a parent process for its own children (serve --workers), never by an operator.
INTERNAL_VARIABLES = {"SKILLSEARCH_SERVE_ARGS", "SKILLSEARCH_WORKER_FACTORY"}


def test_every_variable_the_code_reads_is_in_the_readme() -> None:
    """The other direction: an operator finds every knob in the README (the upstream's token and webhook
    secret and the benchmarks' data root were named only in ``--help``)."""
    read = {f"SKILLSEARCH_{f.name.upper()}" for f in (*fields(Settings), *fields(Limits)) if f.name not in NOT_FROM_ENV}
    for path in (ROOT / "skillsearch").rglob("*.py"):
        read |= set(re.findall(r"SKILLSEARCH_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])", path.read_text(encoding="utf-8")))
    undocumented = read - INTERNAL_VARIABLES - set(re.findall(r"SKILLSEARCH_[A-Z0-9_]+", README))
    assert not undocumented, f"variables the code reads that the README never names: {sorted(undocumented)}"


def test_paths_the_readme_names_exist() -> None:
    named = set(re.findall(r"`(skillsearch/[\w/]+\.py)`", README))
    assert "skillsearch/core/language.py" in named
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"the README names files that do not exist: {missing}"


def test_source_files_the_documents_name_exist() -> None:
    """Every ``skillsearch/``, ``tests/`` and ``benchmarks/`` Python file README.md and docs/*.md name
    (docs/benchmarks.md sent readers to ``skillsearch/calibration.py``, which is ``retrieval/calibration.py``)."""
    missing = sorted({f"{path.name}: {name}" for path in DOCS
                      for name in re.findall(r"(?<![\w/.])((?:skillsearch|tests|benchmarks)/[\w/]+\.(?:py|c))\b",
                                             path.read_text(encoding="utf-8"))
                      if not (ROOT / name).is_file()})
    assert not missing, f"the documents name files that do not exist: {missing}"


def strings_outside_docstrings(tree: ast.AST) -> list[ast.Constant]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def test_messages_point_only_to_what_ships_in_the_wheel() -> None:
    """A string the program shows may not send a user to ``docs/``: the wheel holds the package only
    (docstrings and comments may cite the repository)."""
    pointing = []
    for path in (ROOT / "skillsearch").rglob("*.py"):
        if path.parts[-2] == "bench":  # the benchmarks run from a checkout, beside docs/
            continue
        for node in strings_outside_docstrings(ast.parse(path.read_text(encoding="utf-8"))):
            if re.search(r"docs/[\w.-]+\.(?:md|json)", node.value):
                pointing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not pointing, f"strings that point users to docs/, which the wheel does not hold: {pointing}"


@pytest.mark.parametrize("length", [1024, 1025])
def test_the_readme_lists_the_description_limit_import_applies(tmp_path: Path, length: int) -> None:
    from skillsearch.catalog.importer import parse_path

    folder = tmp_path / "skills" / "long"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: long\ndescription: {'d' * length}\n---\nbody\n")
    parsed = parse_path(tmp_path / "skills", "s", "user:me")
    assert bool(parsed.problems) is (length > 1024)
    assert "description over 1,024 characters" in README


# -- the commands the documents show, read by the command's own parser -------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"[\[\]<>|]|\.\.\.")


def documented_commands() -> list[Any]:
    """The argv (its id: where it is shown) of every complete ``skillsearch`` command line in a ``sh`` block of the README or
    ``docs/*.md``, and of every command of the benchmarks' "Current results" table (what a user copies).
    A synopsis line (``[--grant G]...``, ``A | B``) is not a command and is left out."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        lines = [line for block in re.findall(r"```sh\n(.*?)```", text, re.S)
                 for line in block.replace("\\\n", " ").splitlines()]
        if path.name == "benchmarks.md":
            lines += [cell for row in text.splitlines() if row.startswith("| `")
                      for cell in re.findall(r"`(skillsearch [^`]+)`", row)]
        for line in lines:
            words = shlex.split(line, comments=True)
            if words and words[-1] == "&":
                words.pop()
            if not words or words[0] not in ("skillsearch", ".venv/bin/skillsearch") or PLACEHOLDER.search(line):
                continue
            found.append(pytest.param(words[1:], id=f"{path.name}: {line.strip()}"))
    return found


def test_the_documents_show_many_commands() -> None:
    where = {p.id.split(":")[0] for p in documented_commands()}
    assert {"README.md", "deploy.md", "benchmarks.md"} <= where and len(documented_commands()) >= 30


@pytest.mark.parametrize("argv", documented_commands())
def test_every_documented_command_is_one_the_parser_takes(argv: list[str]) -> None:
    """A command copied from the documents is never a usage error (the benchmarks' commands that wrote
    ``latency-1m-minilm+e5`` were refused once ``--tag`` was checked: ``+`` was not a file-name part)."""
    from skillsearch.cli.main import build_parser
    from skillsearch.cli.usage import UsageError

    try:
        build_parser().parse_args(argv)
    except UsageError as exc:
        pytest.fail(f"skillsearch {shlex.join(argv)}: {exc}")


def test_the_current_results_table_shows_each_files_own_command() -> None:
    """docs/benchmarks.md, "Current results": "Each command is the one in the file's own header"."""
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text.split("## Current results", 1)[1].split("\n## ", 1)[0]
    compared = 0
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 4 or not (stem := re.fullmatch(r"`([\w.+-]+?)(?:\.json)?`", cells[0])):
            continue
        results = ROOT / "benchmarks" / "results" / f"{stem.group(1)}.json"
        assert results.is_file(), f"the table names {results.name}, which is not in benchmarks/results/"
        command = json.loads(results.read_text(encoding="utf-8")).get("command")
        shown = re.fullmatch(r"`([^`]+)`", cells[2])
        if command and shown:
            assert shown.group(1) == command, (stem.group(1), shown.group(1), command)
            compared += 1
    assert compared >= 15


def parser_options() -> list[tuple[str, set[str]]]:
    """``(command path, its long options)`` of every command of the ``skillsearch`` parser, nested ones included."""
    import argparse

    from skillsearch.cli.main import build_parser

    found: list[tuple[str, set[str]]] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        options = {s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
        found.append((path, options))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())

    walk(build_parser(), "")
    return found


def test_the_readme_synopsis_names_every_command_and_option() -> None:
    """README, "The command line": each command of the parser, with each of its options, is in the synopsis
    block a user reads first (``--min-confidence``, ``mcp``, ``calibrate`` and the ``sources`` actions were not)."""
    block = README.split("## The command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines: list[str] = []
    for line in block.splitlines():  # a line that starts with spaces goes on with the command above
        if line.startswith(" ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    missing = []
    for path, options in parser_options():
        if path.startswith("bench "):  # the benchmarks' own options: "Benchmarks" and docs/benchmarks.md
            continue
        shown = [line for line in lines if re.search(rf"skillsearch (\[[^]]*\] )*{re.escape(path)}\b", line)]
        if not shown:
            missing.append(path or "skillsearch")
            continue
        text = " ".join(shown)
        missing += [f"{path} {o}" for o in sorted(options) if o != "--json" and o not in text]
    assert not missing, f"the README's command-line block leaves out: {missing}"


def sync_toml_examples() -> list[Any]:
    """Every ``toml`` block of README.md and docs/*.md that is a ``sync.toml`` (it has ``[upstream]``,
    ``[[subscriptions]]`` or ``[[sources]]``), and the README's heredoc one."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        blocks = re.findall(r"```toml\n(.*?)```", text, re.S) + re.findall(r"<<'TOML'\n(.*?)^TOML$", text, re.S | re.M)
        found += [pytest.param(b, id=f"{path.name}#{i}") for i, b in enumerate(blocks)
                  if re.search(r"^\[(upstream|\[subscriptions\]|\[sources\])\]", b, re.M)]
    return found


@pytest.mark.parametrize("example", sync_toml_examples())
def test_every_sync_toml_example_loads_and_shows_the_defaults(example: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``sync.toml`` copied from the documents loads (a key the code does not know is a VALIDATION_ERROR),
    and a number it shows for ``[upstream]`` is the default the code uses (docs/upstream-api.md left out
    ``deadline_s``, ``max_response_bytes`` and ``max_pages_per_run`` and called ``timeout_s`` per request)."""
    import tomllib

    from skillsearch.sync.config import UpstreamConfig, load_config

    monkeypatch.setenv("SKILLSEARCH_UPSTREAM_TOKEN", "t")
    monkeypatch.setenv("SKILLSEARCH_WEBHOOK_SECRET", "s")
    (tmp_path / "sync.toml").write_text(example, encoding="utf-8")
    load_config(tmp_path / "sync.toml")
    defaults = {f.name: f.default for f in fields(UpstreamConfig)}
    for key, value in tomllib.loads(example).get("upstream", {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            assert value == defaults[key], (key, value, defaults[key])


def test_the_upstream_guide_shows_every_upstream_setting() -> None:
    from skillsearch.sync.config import UpstreamConfig

    guide = (ROOT / "docs" / "upstream-api.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"^(\w+) = ", guide.split("## 3.", 1)[1], re.M))
    missing = {f.name for f in fields(UpstreamConfig)} - shown - {"token", "webhook_secret"}
    assert not missing, f"settings docs/upstream-api.md does not show: {sorted(missing)}"


def test_the_architecture_names_every_module() -> None:
    """docs/architecture.md is where a reviewer looks a module up: each one (the benchmark harness aside,
    which docs/benchmarks.md describes) is named there as ``name.py`` or ``package/name.py``."""
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    unnamed = []
    for path in sorted((ROOT / "skillsearch").rglob("*.py")):
        relative = path.relative_to(ROOT / "skillsearch")
        if path.name in ("__init__.py", "__main__.py") or relative.parts[0] in ("sample", "bench"):
            continue
        if f"`{relative.as_posix()}" not in architecture and f"`{path.name}`" not in architecture:
            unnamed.append(relative.as_posix())
    assert not unnamed, f"modules docs/architecture.md does not name: {unnamed}"


def test_a_readme_layout_row_that_lists_modules_lists_them_all() -> None:
    """README, "Layout": a package row names all of its modules, or says it names some (``...``); the http,
    mcp and cli rows looked whole and left out seven modules."""
    rows = table_rows("| path | what |")
    checked = 0
    for path, what in ((row[0], row[1]) for row in rows):
        package = re.fullmatch(r"`(skillsearch/\w+)/`", path)
        if not package or "..." in what or not re.search(r"`\w+\.py`", what):
            continue
        modules = {p.name for p in (ROOT / package.group(1)).glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
        missing = sorted(m for m in modules if f"`{m}`" not in what)
        assert not missing, f"README's {package.group(1)}/ row leaves out {missing}"
        checked += 1
    assert checked >= 3


def test_the_index_format_names_the_vector_files_and_their_thresholds() -> None:
    """index/README.md, the data directory's format: its ``vectors/`` rows are the files the vector store
    writes, and the row counts it gives are the code's (it described ``rows.json`` and an int8 copy from 40k
    rows after both had changed)."""
    from skillsearch.retrieval import vector_files
    from skillsearch.retrieval.vector_saves import MAPPED_FROM
    from skillsearch.retrieval.vector_stage import COMPACT_FROM

    text = (ROOT / "index" / "README.md").read_text(encoding="utf-8")
    rows = {cell for line in text.splitlines() if line.startswith("| `vectors/")
            for cell in re.findall(r"`vectors/([\w.]+)`", line.split("|")[1])}
    written = {vector_files.MATRIX_FILE, vector_files.ROWS_FILE, vector_files.LOG_FILE, vector_files.CODES_FILE,
               vector_files.SCALES_FILE}
    assert rows == written
    assert f"from {COMPACT_FROM:,} rows: the matrix's int8 copy" in text
    assert f"from {MAPPED_FROM // 1000}k rows it ends in spare zero rows" in text


def test_every_error_code_a_surface_answers_is_in_the_readme() -> None:
    """The error tree (``core/errors.py``) and the HTTP app's routing errors: a program that reads
    ``error.code`` finds each in the README (``NOT_FOUND``, ``METHOD_NOT_ALLOWED``, ``INTERNAL`` and
    ``UPSTREAM_UNAVAILABLE`` were answered but named nowhere there)."""
    import skillsearch.http.errors as http_errors
    from skillsearch.core import errors

    def tree(cls: type) -> list[type]:
        return [cls, *(c for sub in cls.__subclasses__() for c in tree(sub))]

    codes = {c.code for c in tree(errors.SkillSearchError) if c.__module__ == errors.__name__}
    codes |= {c.code for c in http_errors._ROUTING.values()}
    missing = sorted(code for code in codes if not re.search(rf"`[^`\n]*\b{code}\b[^`\n]*`", README))
    assert not missing, f"error codes the README never names: {missing}"


def test_every_argument_of_every_command_says_what_it_is() -> None:
    """``--help`` is the first document a user reads: each positional and option of every command (nested ones
    included) has a help text (``import``'s ``path``, ``search``'s ``query``, ``--mode``, ``--kind``,
    ``--cursor``, ``--host`` and the ``snapshot`` paths had none)."""
    import argparse

    from skillsearch.cli.main import build_parser

    silent: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                silent.append(f"skillsearch {path}: {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "")
    assert not silent, f"arguments without a help text: {silent}"


def test_the_rules_decision_table_quotes_the_lodo_report() -> None:
    """docs/rules.md's decision table reads its figures from ``benchmarks/results/lodo-dev.md`` (audit: the
    confidence as the refusal, 8.3 % of the negatives, and MetaTool's hits at confidence >= 0.8, 0.97 right,
    were the figures of a report two refits old; the report says 6.2 % and 0.964)."""
    rules = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    report = (ROOT / "benchmarks" / "results" / "lodo-dev.md").read_text(encoding="utf-8")
    rows = {cells[0]: cells for row in report.splitlines() if row.startswith("| ")
            for cells in [[c.strip() for c in row.strip().strip("|").split("|")]]}
    fits = {"confidence": "as the refusal it answered {neg} of the negatives `no_match` left out (worst false"
                          " refusals {worst})",
            "cos": "alone: negatives {neg} left out, worst false refusals {worst}",
            "cos + cos_bg": "with `cos`, negatives {neg} (worst {worst})"}
    for fit, said in fits.items():
        worst, neg = float(rows[fit][2]), float(rows[fit][-1])
        assert said.format(neg=f"{neg * 100:.1f} %", worst=f"{worst * 100:.2f} %") in rules, fit
    right = {name: float(rows[name][-1].split()[0]) for name in ("metatool", "skills")}
    assert (f"hits at confidence >= 0.8 right: MetaTool {right['metatool']:.2f}, skills {right['skills']:.2f}"
            in rules)
