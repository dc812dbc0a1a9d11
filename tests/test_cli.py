"""The command-line contract scripts rely on: --data-dir, --json shapes, error objects and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clisupport import run, sample_copy

from skillsearch.core.views import WEAK_CONFIDENCE


@pytest.fixture
def data_dir(sample_dir: Path, tmp_path: Path) -> Path:
    return sample_copy(sample_dir, tmp_path)




def test_search_json_has_the_documented_shape(data_dir: Path) -> None:
    code, payload = run(data_dir, "search", "roll back a bad deploy", "--limit", "3", "--json")
    assert code == 0 and payload["no_match"] is False and len(payload["hits"]) == 3
    assert {"skill_id", "slug", "name", "kind", "score"} <= set(payload["hits"][0])


def test_search_json_carries_confidence_and_the_reason_for_no_match(data_dir: Path) -> None:
    code, payload = run(data_dir, "search", "roll back a bad deploy", "--json")
    conf = [h["confidence"] for h in payload["hits"]]
    assert code == 0 and all(0.0 <= c <= 1.0 for c in conf)
    code, cut = run(data_dir, "search", "roll back a bad deploy", "--min-confidence", str(conf[0]), "--json")
    assert code == 0 and cut["hits"] and all(h["confidence"] >= conf[0] for h in cut["hits"])
    code, nothing = run(data_dir, "search", "recipe for a gluten-free chocolate cake", "--json")
    # The shipped threshold is conservative (docs/rules.md): no_match, or no confident hit.
    assert code == 0 and (nothing["no_match_reason"] in ("low_confidence", "no_good_match") if nothing["no_match"]
                          else all(h["confidence"] < 0.5 for h in nothing["hits"]))
    code, text = run(data_dir, "search", "来月の京都旅行で泊まる旅館を予約して")
    assert code == 0 and "multilingual search is off" in text and "--encoder minilm+e5" in text


def test_search_text_warns_when_the_top_hit_is_weak(data_dir: Path) -> None:
    tops = {}
    for query in ("profile slow python code", "deploy a container"):
        _, payload = run(data_dir, "search", query, "--json")
        _, text = run(data_dir, "search", query)
        tops[query] = payload["hits"][0]["confidence"]
        weak = tops[query] < WEAK_CONFIDENCE
        assert ("note: weak match: the top hit's confidence is" in text) is weak, (query, tops[query], text)
        if weak:  # said before the hits, with the number the JSON carries
            assert text.splitlines()[0].endswith("read its description before you rely on it")
            assert f"{tops[query]:.2f}" in text.splitlines()[0]
    assert tops["profile slow python code"] >= WEAK_CONFIDENCE > tops["deploy a container"], tops


def test_grants_restrict_the_cli_caller(data_dir: Path) -> None:
    code, payload = run(data_dir, "search", "database", "--grant", "team:data-science", "--limit", "20", "--json")
    assert code == 0
    assert payload["hits"] and all(h["skill_id"] for h in payload["hits"])
    code, listing = run(data_dir, "list", "--grant", "team:data-science", "--limit", "200", "--json")
    ids = {i["skill_id"] for i in listing["items"]}
    assert {h["skill_id"] for h in payload["hits"]} <= ids
    code, everything = run(data_dir, "list", "--limit", "200", "--json")
    assert len(everything["items"]) > len(listing["items"])


def test_get_of_an_invisible_skill_is_not_found_with_an_error_object(data_dir: Path) -> None:
    _, hits = run(data_dir, "search", "postgres failover", "--grant", "sub:ops-pro", "--json")
    ops_skill = hits["hits"][0]["skill_id"]
    code, payload = run(data_dir, "get", ops_skill, "--grant", "sub:starter-pack", "--json")
    assert code == 1 and payload["error"]["code"] == "SKILL_NOT_FOUND" and payload["error"]["message"]
    code, payload = run(data_dir, "get", ops_skill, "--json")
    assert code == 0 and payload["skill_id"] == ops_skill and payload["instructions"]


def test_resolve_reports_missing_parameters_then_substitutes(data_dir: Path) -> None:
    _, hits = run(data_dir, "search", "canary deploy", "--kind", "flow_template", "--json")
    skill_id = hits["hits"][0]["skill_id"]
    _, detail = run(data_dir, "get", skill_id, "--json")
    required = [p for p in detail["parameters"] if p["required"]]
    assert required
    code, err = run(data_dir, "resolve", skill_id, "--json")
    assert code == 1 and err["error"]["code"] == "VALIDATION_ERROR"
    missing = {p["field"] for p in err["error"]["details"]["problems"] if p["code"] == "missing"}
    assert missing == {f"parameters.{p['name']}" for p in required}
    params = []
    for p in required:
        value = {"integer": "3", "number": "1.5", "boolean": "true"}.get(p["type"], "x")
        params += ["--param", f"{p['name']}={(p['enum'] or [value])[0]}"]
    code, flow = run(data_dir, "resolve", skill_id, *params, "--json")
    assert code == 0
    assert [s["tool"] for s in flow["steps"]] == [s["tool"] for s in detail["steps"]]
    assert "{" + required[0]["name"] + "}" not in json.dumps(flow["steps"])


def test_resolve_names_the_text_that_is_not_of_the_parameters_type(data_dir: Path) -> None:
    """Every command-line value is text: "expected integer, got string" told nobody which text was wrong."""
    code, err = run(data_dir, "resolve", "deploy-service-canary", "--param", "service=api", "--param",
                    "canary_percent=25.5", "--json")
    assert code == 1 and err["error"]["code"] == "VALIDATION_ERROR"
    # Said beside the other problems of the same call, as every surface reports them.
    assert "missing required parameter 'image_tag'" in err["error"]["message"]
    assert "canary_percent: '25.5' is not a whole number (expected integer)" in err["error"]["message"]
    assert "got string" not in err["error"]["message"]
    assert {"field": "parameters.canary_percent", "code": "invalid",
            "message": "canary_percent: '25.5' is not a whole number (expected integer)"} in err["error"]["details"]["problems"]
    assert {p["field"] for p in err["error"]["details"]["problems"]} == {"parameters.canary_percent",
                                                                        "parameters.image_tag"}


def test_import_exit_code_says_whether_anything_failed(tmp_path: Path) -> None:
    good = tmp_path / "skills" / "ok"
    good.mkdir(parents=True)
    (good / "SKILL.md").write_text("---\nname: ok\ndescription: Fine.\n---\nbody\n")
    code, payload = run(tmp_path / "d", "import", str(tmp_path / "skills"), "--source", "s", "--grant", "user:u",
                        "--json")
    # The first import into a new data directory builds its index: what it embedded is reported.
    assert code == 0 and payload["created"] == 1 and payload["embedded"] == 1
    bad = tmp_path / "skills" / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: bad\n---\n")
    code, payload = run(tmp_path / "d", "import", str(tmp_path / "skills"), "--source", "s", "--grant", "user:u",
                        "--json")
    assert code == 1 and payload["unchanged"] == 1 and payload["problems"][0]["reason"] == "missing description"
    assert payload["embedded"] == 0  # nothing changed, nothing embedded
    more = tmp_path / "more"
    for name in ("one", "two"):
        (more / name).mkdir(parents=True)
        (more / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Skill {name}.\n---\nbody\n")
    code, payload = run(tmp_path / "d2", "import", str(more), "--source", "m", "--grant", "user:u", "--json")
    assert code == 0 and payload["created"] == 2 and payload["embedded"] == 2


def test_reindex_rebuilds_from_the_store(data_dir: Path) -> None:
    code, payload = run(data_dir, "reindex", "--json")
    assert code == 0 and payload["documents"] >= 40 and payload["embedded"] == payload["documents"]


def test_cli_as_a_real_process(data_dir: Path) -> None:
    """One real subprocess: the console entry point, exit codes, stdout holding only JSON."""
    env = {**os.environ, "SKILLSEARCH_DATA_DIR": str(data_dir)}
    ok = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "search", "git bisect", "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["hits"][0]["slug"] == "git-bisect-regressions"
    bad = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "search", "x", "--mode", "fuzzy"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "Traceback" not in bad.stderr
    # An unknown fusion is a usage error too (the choices are the fusion registry's names).
    fusion = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "search", "x", "--fusion", "borda"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert fusion.returncode == 2 and "invalid choice: 'borda'" in fusion.stderr and "Traceback" not in fusion.stderr


def test_a_corrupt_catalog_file_is_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "catalog.sqlite3").write_bytes(b"this is not a database" * 100)
    code, payload = run(data, "list", "--json")
    assert code == 1 and payload["error"]["code"] == "INDEX_NOT_READY"
    assert "catalog.sqlite3 cannot be opened" in payload["error"]["message"]
    assert (data / "catalog.sqlite3").read_bytes() == b"this is not a database" * 100


# -- usage errors: checked before anything is opened, exit 2, shown as JSON under --json ---------------------


def _cli(*argv: bytes | str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The console entry point as a real process, its arguments given as bytes (as a terminal passes them)."""
    return subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", *argv], capture_output=True,
                          env={**os.environ, **(env or {})}, timeout=120)


@pytest.mark.parametrize(("argv", "named"), [
    ((b"search", b"revue de code caf\xe9"), b"argument query: 'revue de code caf\\xe9'"),
    ((b"search", b"abc\xffdef", b"--mode", b"lexical"), b"argument query: 'abc\\xffdef'"),
    ((b"get", b"caf\xe9"), b"argument SKILL_ID|SLUG: 'caf\\xe9'"),
    ((b"resolve", b"caf\xe9"), b"argument SKILL_ID|SLUG: 'caf\\xe9'"),
    ((b"resolve", b"some-slug", b"--param", b"service=caf\xe9"), b"argument --param: 'service=caf\\xe9'"),
    ((b"list", b"--tag", b"caf\xe9"), b"argument --tag: 'caf\\xe9'"),
    ((b"import", b"skills", b"--source", b"abc\xff", b"--grant", b"team:a"), b"argument --source: 'abc\\xff'"),
])
def test_text_that_is_not_utf8_is_a_usage_error_naming_the_argument(tmp_path: Path, argv: tuple[bytes, ...],
                                                                    named: bytes) -> None:
    data = tmp_path / "d"
    done = _cli(b"--data-dir", bytes(data), *argv)
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    lines = done.stderr.splitlines()
    errors = [line for line in lines if b"error:" in line]
    assert len(errors) == 1 and named + b" is not valid UTF-8 text" in errors[0], done.stderr
    assert b"Traceback" not in done.stderr and b"INTERNAL" not in done.stderr
    assert not data.exists()  # refused before the data directory is created or opened
    as_json = _cli(b"--data-dir", bytes(data), *argv, b"--json")
    assert as_json.returncode == 2 and as_json.stderr == b""
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "VALIDATION_ERROR" and named.decode("ascii") + " is not valid UTF-8" in error["message"]


def test_a_data_dir_that_is_not_utf8_is_refused_before_it_is_created(tmp_path: Path) -> None:
    data = bytes(tmp_path) + b"/abc\xff"
    done = _cli(b"--data-dir", data, b"list")
    assert done.returncode == 2 and b"argument --data-dir:" in done.stderr and b"not valid UTF-8" in done.stderr
    assert os.listdir(bytes(tmp_path)) == []
    from_env = _cli(b"list", env={"SKILLSEARCH_DATA_DIR": os.fsdecode(data)})
    assert from_env.returncode == 2 and b"argument --data-dir:" in from_env.stderr
    assert os.listdir(bytes(tmp_path)) == []


def test_upstream_from_a_path_that_does_not_exist_is_refused_before_it_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It served an empty subscription from a mistyped path (audit)."""
    missing = tmp_path / "no-such-folder"
    code, payload = run(tmp_path / "d", "upstream", "--from", f"team={missing}", "--port", "0", "--json")
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["message"] == f"--from team={missing}: no such folder or bundle"
    assert "serving on" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ("serve", "--port", "99999"),
    ("serve", "--port", "-1"),
    ("upstream", "--from", "skills", "--port", "99999"),
    ("upstream", "--from", "skills", "--port", "65536"),
    ("mcp", "--http", "--port", "70000"),
    ("mcp", "--http", "--port", "-1"),
])
def test_a_port_out_of_range_is_a_usage_error_on_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, text = run(tmp_path / "d", *argv)
    err = capsys.readouterr().err
    assert code == 2 and text == ""
    assert f"argument --port: {argv[-1]} is out of range: give a port number between 0 and 65535" in err
    assert "serving on" not in err and not (tmp_path / "d").exists()
    code, payload = run(tmp_path / "d", *argv, "--json")
    assert code == 2 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert "--port" in payload["error"]["message"] and "usage:" in payload["error"]["details"]["usage"]


@pytest.mark.parametrize(("argv", "said"), [
    (("serve", "--workers", "0"), "argument --workers: 0 is out of range: give a number of worker processes 1 or more"),
    (("serve", "--degraded-after", "-1"), "argument --degraded-after: -1 is out of range: give a number of seconds"
                                          " 0 or more"),
    (("serve", "--degraded-after", "nan"), "argument --degraded-after: nan is out of range"),
])
def test_serve_numbers_out_of_range_are_usage_errors_like_its_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
) -> None:
    """`--workers 0` and `--degraded-after -1` were exit code 1 (`error: VALIDATION_ERROR: ...`) where
    `--workers x` and `--port 70000` are usage errors: a value out of range is one, as an unparsable one is."""
    code, text = run(tmp_path / "d", *argv, "--port", "0")
    err = capsys.readouterr().err
    assert code == 2 and text == "" and said in err and "usage: skillsearch serve" in err
    assert "serving on" not in err and not (tmp_path / "d").exists()
    code, payload = run(tmp_path / "d", *argv, "--port", "0", "--json")
    assert code == 2 and payload["error"]["code"] == "VALIDATION_ERROR" and said in payload["error"]["message"]


@pytest.mark.parametrize(("argv", "said"), [
    (("search", "foo", "--grant", "starter-pack"), "did you mean sub:starter-pack?"),
    (("get",), "the following arguments are required: SKILL_ID|SLUG"),
    (("search", "foo", "--mode", "fuzzy"), "invalid choice: 'fuzzy'"),
    (("search", "foo", "--limit", "0"), "argument --limit: 0 is out of range"),
    (("search", "foo", "--limit", "101"), "argument --limit: 101 is out of range: give a whole number between 1"
                                          " and 100 (SKILLSEARCH_MAX_LIMIT)"),
    (("list", "--limit", "201"), "argument --limit: 201 is out of range: give a whole number between 1 and 200"),
    (("search", "foo", "--semantic-weight", "2"), "argument --semantic-weight: 2 is out of range: give a weight"
                                                  " between 0 and 1"),
    (("search", "foo", "--min-confidence", "-0.5"), "argument --min-confidence: -0.5 is out of range: give a"
                                                    " confidence between 0 and 1"),
    (("resolve", "some-slug", "--param", "service"), "argument --param: takes NAME=VALUE, got 'service'"),
    (("resolve", "some-slug", "--param", "a=1", "--param", "a=2"), "argument --param: a is given twice"),
    (("import", "skills", "--source", "", "--grant", "team:a"), "argument --source: must not be empty"),
])
def test_usage_errors_print_the_error_object_on_stdout_under_json(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
) -> None:
    code, text = run(data_dir, *argv)
    assert code == 2 and text == "" and said in capsys.readouterr().err
    for where in (len(argv), 1):  # --json at the end, or right after the command
        code, payload = run(data_dir, *argv[:where], "--json", *argv[where:])
        assert code == 2 and capsys.readouterr().err == ""
        assert payload["error"]["code"] == "VALIDATION_ERROR" and said in payload["error"]["message"]
        assert set(payload["error"]) == {"code", "message", "details"}
        # README: usage errors carry details.usage beside details.problems, a command's own checks too
        assert payload["error"]["details"]["usage"].startswith(f"usage: skillsearch {argv[0]}")


def test_a_global_usage_error_under_json_is_an_error_object_in_a_real_process(tmp_path: Path) -> None:
    done = _cli("--data-dir", str(tmp_path / "nonexist" / "x"), "list", "--json")
    assert done.returncode == 2 and done.stderr == b""
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "VALIDATION_ERROR" and "the folder" in error["message"] and "does not exist" in error["message"]
    # Without --json: argparse's usage and error lines on stderr, nothing on stdout.
    done = _cli("--data-dir", str(tmp_path / "nonexist" / "x"), "list")
    assert done.returncode == 2 and done.stdout == b"" and done.stderr.startswith(b"usage: skillsearch")


def test_an_empty_lexical_search_says_whether_a_filter_or_the_words_left_nothing(data_dir: Path) -> None:
    for query in ("xyzzyq", "証明書"):
        code, text = run(data_dir, "search", query, "--mode", "lexical")
        assert code == 0 and "No skill you can see shares a word with this request" in text, text
        assert "(no_shared_word)" in text and "filters" not in text and "grants" not in text
    code, payload = run(data_dir, "search", "xyzzyq", "--mode", "lexical", "--json")
    assert payload["no_match"] and payload["no_match_reason"] == "no_shared_word"
    # A kind, a tag or a caller's grants can be what leaves nothing: the answer says so.
    for extra in (("--kind", "flow_template"), ("--tag", "kubernetes"), ("--grant", "team:data-science")):
        code, payload = run(data_dir, "search", "xyzzyq", "--mode", "lexical", *extra, "--json")
        assert code == 0 and payload["no_match_reason"] == "no_candidates", extra
        assert "filters, or your grants" in payload["no_match_message"]


def test_list_says_when_nothing_is_listed_and_resolve_points_to_get(data_dir: Path) -> None:
    code, text = run(data_dir, "list", "--tag", "no-such-tag")
    assert code == 0 and text == "(no skills you can see with that kind or tag)\n"
    code, text = run(data_dir, "list", "--grant", "user:nobody")
    assert code == 0 and text == "(no skills you can see)\n"
    code, payload = run(data_dir, "get", "git-bisect-regressions", "--json")
    assert code == 0 and payload["kind"] == "knowledge"
    code, err = run(data_dir, "resolve", "git-bisect-regressions", "--json")
    assert code == 1 and err["error"]["code"] == "SKILL_INVALID"
    assert "read it with `skillsearch get git-bisect-regressions`" in err["error"]["message"]
    assert "get_skill" not in err["error"]["message"]


def test_calibrate_prints_a_line_per_number_and_counts_the_vectors(data_dir: Path) -> None:
    """The text view printed the calibration's nested dicts whole: 68 KB, two lines of centroids (audit)."""
    code, text = run(data_dir, "calibrate")
    assert code == 0
    lines = text.splitlines()
    assert any(line.startswith("no_match_cosine: ") or ".no_match_cosine: " in line for line in lines), text
    assert max(len(line) for line in lines) < 200, max(lines, key=len)[:200]
    code, payload = run(data_dir, "calibrate", "--json")
    assert code == 0 and "decision" in json.dumps(payload)


def test_calibrate_refuses_labelled_queries_that_name_no_skill(data_dir: Path, tmp_path: Path) -> None:
    """A mistyped expected slug scored as a miss everywhere (MRR 0) and tuned the weight against nothing."""
    queries = tmp_path / "labelled.jsonl"
    queries.write_text(json.dumps({"query": "profile python code", "expected": ["python-profiling"]}) + "\n"
                       + json.dumps({"query": "rotate certificates", "expected": ["tls-cert-rotaton"]}) + "\n")
    code, payload = run(data_dir, "calibrate", "--queries", str(queries), "--json")
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["message"] == f"{queries}:2: no skill has the slug(s) tls-cert-rotaton"


@pytest.mark.parametrize(("line", "message"), [
    ({"query": "profile python code", "expected": "python-profiling"}, "expected must be a non-empty list of skill slugs"),
    ({"query": None, "expected": ["python-profiling"]}, "query must be a non-empty string"),
    ({"query": "  ", "expected": ["python-profiling"]}, "query must be a non-empty string"),
    ({"query": "profile python code", "expected": []}, "expected must be a non-empty list of skill slugs"),
    ({"query": "profile python code", "expected": [3]}, "expected must be a non-empty list of skill slugs"),
])
def test_calibrate_refuses_labelled_lines_that_are_not_a_query_and_its_slugs(
        data_dir: Path, tmp_path: Path, line: dict[str, Any], message: str) -> None:
    """Audit 2, item 7: a string ``expected`` was iterated letter by letter, a null query tuned on "None",
    and ``expected: []`` replaced a real tuning with one on a query no skill answers. Each is refused with
    its file and line."""
    queries = tmp_path / "labelled.jsonl"
    good = {"query": "rotate certificates", "expected": ["tls-certificate-renewal"]}
    queries.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    code, payload = run(data_dir, "calibrate", "--queries", str(queries), "--json")
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["message"] == f"{queries}:2: {message}"


def test_calibrate_refuses_a_labelled_file_with_no_queries(data_dir: Path, tmp_path: Path) -> None:
    queries = tmp_path / "labelled.jsonl"
    queries.write_text("\n\n")
    code, payload = run(data_dir, "calibrate", "--queries", str(queries), "--json")
    assert code == 1 and payload["error"]["message"].startswith(f"{queries}: no labelled queries")


def test_text_output_escapes_control_characters_stored_before_they_were_refused(tmp_path: Path) -> None:
    """Import and sync now refuse control characters in names and descriptions, but a catalog may hold
    skills stored before: `list`, `search` and `get` printed their names raw (``a\\x1b[2Jb`` cleared the
    terminal, U+202E turned the line around). The text output now shows them as escapes, and a name's line
    break too (it would forge a line of the listing); ``--json`` still gives every string exactly."""
    from skillsearch.core.domain import Revision, SkillContent
    from skillsearch.core.settings import Settings
    from skillsearch.service import Catalog

    name, description = "evil\x1b[2J\x1b]0;owned\x07\u202eexe\nsk_forged  knowledge  x", "Rolls\x9b31m out\nkubectl."
    body = "Run \x1b[31mkubectl rollout\x1b[0m.\r\nDone."
    data = tmp_path / "data"
    catalog = Catalog(Settings(data_dir=data, seed_sample=False, encoder="hashing"))
    try:  # what the store holds from before the rule: built without SkillContent's checks
        catalog.store.upsert(SkillContent.model_construct(
            skill_id="sk_legacy", slug="legacy", grant="team:t", source="old", resources=(),
            revision=Revision(name=name, description=description, kind="knowledge", instructions=body)))
    finally:
        catalog.close()
    outputs = []
    for argv in (("list",), ("search", "kubectl rollout", "--mode", "lexical"), ("get", "legacy")):
        code, text = run(data, "--encoder", "hashing", *argv)
        assert code == 0, text
        outputs.append(text)
        assert not any(c in text for c in "\x1b\x07\x9b\u202e"), (argv, text)
        assert "evil\\x1b[2J\\x1b]0;owned\\x07\\u202eexe\\nsk_forged" in text, (argv, text)
    assert "Rolls\\x9b31m out\nkubectl." in outputs[1] and "Rolls\\x9b31m out\nkubectl." in outputs[2]
    assert "Run \\x1b[31mkubectl rollout\\x1b[0m.\r\nDone." in outputs[2]
    code, got = run(data, "--encoder", "hashing", "get", "legacy", "--json")
    assert code == 0 and (got["name"], got["description"], got["instructions"]) == (name, description, body)


# -- get --resource: a skill's file, exact ------------------------------------------------------------------


@pytest.fixture
def with_resources(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A data directory holding one folder skill with a script (BOM, CRLF), a binary asset (NUL bytes) and a
    reference whose text holds a terminal escape."""
    files = {
        "scripts/run.py": b"\xef\xbb\xbf#!/usr/bin/env python3\r\nprint('hi')\r\n",
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff",
        "references/notes.md": b"# Notes\n\x1b[2Jcleared\n",
    }
    skill = tmp_path / "skills" / "report-builder"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: report-builder\ndescription: Build a PDF report from a CSV file.\n"
                                    "---\n# Report builder\nRun scripts/run.py.\n", encoding="utf-8")
    for path, content in files.items():
        (skill / path).parent.mkdir(parents=True, exist_ok=True)
        (skill / path).write_bytes(content)
    data = tmp_path / "data"
    code, report = run(data, "--encoder", "hashing", "import", str(tmp_path / "skills"), "--source", "local",
                       "--grant", "team:reports", "--json")
    assert code == 0 and report["created"] == 1, report
    return data, files


def test_get_resource_writes_the_exact_bytes_of_each_file(with_resources: tuple[Path, dict[str, bytes]]) -> None:
    """``get SKILL --resource PATH`` is the CLI's read of a skill's file (HTTP and MCP had one, the CLI none):
    the bytes exactly as imported on stdout of a real process, BOM, CRLF and NUL included; ``--json`` gives
    the metadata with text as text and binary as base64."""
    import base64
    import hashlib

    data, files = with_resources
    env = {**os.environ, "SKILLSEARCH_DATA_DIR": str(data)}
    for path, content in files.items():
        got = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "get",
                              "report-builder", "--resource", path], capture_output=True, env=env, timeout=60)
        assert got.returncode == 0 and got.stdout == content, (path, got.stderr)
    code, payload = run(data, "--encoder", "hashing", "get", "report-builder", "--resource", "assets/logo.png",
                        "--json")
    assert code == 0 and payload["encoding"] == "base64" and payload["path"] == "assets/logo.png"
    assert base64.b64decode(payload["content"]) == files["assets/logo.png"]
    assert payload["sha256"] == hashlib.sha256(files["assets/logo.png"]).hexdigest()
    code, payload = run(data, "--encoder", "hashing", "get", "report-builder", "--resource", "scripts/run.py",
                        "--json")
    assert code == 0 and payload["encoding"] == "text"
    assert payload["content"].encode("utf-8") == files["scripts/run.py"]
    code, by_id = run(data, "--encoder", "hashing", "get", "report-builder", "--resource", payload["resource_id"],
                      "--json")
    assert code == 0 and by_id["path"] == "scripts/run.py"


def test_get_resource_names_the_files_there_are_and_hides_invisible_skills(
        with_resources: tuple[Path, dict[str, bytes]]) -> None:
    data, _ = with_resources
    code, missing = run(data, "--encoder", "hashing", "get", "report-builder", "--resource", "scripts/nope.py",
                        "--json")
    assert code == 1 and missing["error"]["code"] == "RESOURCE_NOT_FOUND"
    assert missing["error"]["details"]["resources"] == ["assets/logo.png", "references/notes.md", "scripts/run.py"]
    code, hidden = run(data, "--encoder", "hashing", "get", "report-builder", "--grant", "team:other",
                       "--resource", "scripts/run.py", "--json")
    assert code == 1 and hidden["error"]["code"] == "SKILL_NOT_FOUND" and "resources" not in json.dumps(hidden)


def test_get_resource_does_not_write_binary_or_escapes_to_a_terminal(
        with_resources: tuple[Path, dict[str, bytes]]) -> None:
    """On a terminal (a real pty), binary data and control characters could drive it: the command refuses
    with a usage error that says to redirect or use --json; plain text is written as is."""
    import pty

    data, _ = with_resources
    env = {**os.environ, "SKILLSEARCH_DATA_DIR": str(data)}

    def on_a_terminal(path: str) -> tuple[int, bytes, bytes]:
        main_fd, child_fd = pty.openpty()
        try:
            proc = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "get",
                                   "report-builder", "--resource", path], stdout=child_fd, stderr=subprocess.PIPE,
                                  env=env, timeout=60)
            os.close(child_fd)
            shown = b""
            while True:
                try:
                    chunk = os.read(main_fd, 65536)
                except OSError:  # the pty's other end is closed: all read
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            os.close(main_fd)
        return proc.returncode, shown, proc.stderr

    for path in ("assets/logo.png", "references/notes.md"):
        code, shown, err = on_a_terminal(path)
        assert code == 2 and shown == b"" and b"redirect the output" in err and b"Traceback" not in err, (path, err)
    code, shown, _ = on_a_terminal("scripts/run.py")
    assert code == 0 and b"print('hi')" in shown


@pytest.mark.parametrize("argv", [
    ("calibrate", "--queries", "no-such-queries.jsonl"),  # a command's own VALIDATION_ERROR
    ("sources", "remove", "no-such-source"),
    ("list", "--limit", "0"),  # a usage error
])
def test_every_validation_error_under_json_has_details_problems(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    """README: `details.problems` is the one shape of every VALIDATION_ERROR on every surface, the CLI's
    `--json` included; these came with `details: {}` (or only `name`, `usage`), as over HTTP they would not."""
    code, payload = run(data_dir, *argv, "--json")
    assert code in (1, 2) and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["details"]["problems"] == [{"field": "", "message": payload["error"]["message"]}]


def test_python_dash_m_skillsearch_runs_the_command(tmp_path: Path) -> None:
    """An MCP host configured with ``python -m skillsearch mcp`` (no script on its PATH) got "No module named
    skillsearch.__main__"."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "skillsearch", "--data-dir", str(tmp_path / "d"), "list", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["items"]) == 45


def test_a_caller_of_main_goes_on_with_its_heap_unfrozen(tmp_path: Path) -> None:
    """A server's own process freezes its heap as it exits (``cli/main._freeze_for_exit``); a caller of
    ``main(argv)`` that goes on (a test, an embedding program) must not be left with a frozen heap, whose
    cycles would never be collected."""
    import gc

    before = gc.get_freeze_count()
    code, _ = run(tmp_path / "d", "list")
    assert code == 0 and gc.get_freeze_count() == before == 0


def test_resolve_reads_a_number_as_mcp_and_http_read_its_json(data_dir: Path) -> None:
    """``--param max_error_ratio=2`` resolved to ``2.0`` where MCP and HTTP give JSON ``2``: the same value
    made a different tool call depending on the surface."""
    base = ["--param", "service=api", "--param", "image_tag=v1"]
    code, flow = run(data_dir, "resolve", "deploy-service-canary", *base, "--param", "max_error_ratio=2", "--json")
    assert code == 0
    (compare,) = [s["args"] for s in flow["steps"] if s["tool"] == "metrics.compare"]
    assert compare["max_ratio"] == 2 and isinstance(compare["max_ratio"], int)
    code, flow = run(data_dir, "resolve", "deploy-service-canary", *base, "--param", "max_error_ratio=2.5", "--json")
    assert code == 0 and [s["args"]["max_ratio"] for s in flow["steps"] if s["tool"] == "metrics.compare"] == [2.5]
    code, err = run(data_dir, "resolve", "deploy-service-canary", *base, "--param", "max_error_ratio=nan", "--json")
    assert code == 1 and {"field": "parameters.max_error_ratio", "code": "invalid",
                          "message": "max_error_ratio: 'nan' is not a number (expected number)"} \
        in err["error"]["details"]["problems"]


def test_an_empty_search_is_refused_before_anything_is_opened(tmp_path: Path) -> None:
    """`search "  "` on a new data directory created it, seeded the sample, loaded the model and built the
    index (half a minute on 2 cores) only to say the query was empty. It is refused first, and nothing is made."""
    data = tmp_path / "new"
    code, payload = run(data, "search", "   ", "--json")
    error = payload["error"]
    assert code == 1
    assert error["code"] == "VALIDATION_ERROR" and error["details"]["problems"] == [
        {"field": "query", "message": "query must not be empty"}]
    assert not data.exists()
