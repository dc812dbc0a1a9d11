"""Principals file and bearer tokens: hashes only on disk, constant-time lookup, clear errors."""

from __future__ import annotations

import io
import json
import stat
import tomllib
from pathlib import Path

import pytest

from skillsearch.cli import main
from skillsearch.core.domain import Principal
from skillsearch.core.errors import AccessDeniedError, UnauthenticatedError, ValidationError
from skillsearch.http.auth import (
    DEMO_TOKEN,
    PrincipalRegistry,
    add_principal,
    bearer_token,
    hash_token,
    remove_principal,
    require_scope,
)
from skillsearch.service import Catalog


def test_add_principal_stores_only_the_hash_in_the_shared_shape(tmp_path: Path) -> None:
    path = tmp_path / "principals.toml"
    token = add_principal(path, "analytics-bot", ["team:data-science", "sub:starter-pack"], ["skills:read"])
    text = path.read_text(encoding="utf-8")
    assert token not in text
    table = tomllib.loads(text)["principals"]["analytics-bot"]
    assert table == {
        "token_sha256": hash_token(token),
        "grants": ["sub:starter-pack", "team:data-science"],
        "scopes": ["skills:read"],
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    principal = PrincipalRegistry(path).authenticate(token)
    assert principal.name == "analytics-bot"
    assert principal.grants == frozenset({"team:data-science", "sub:starter-pack"})
    assert PrincipalRegistry(path).principal("analytics-bot") == principal


def test_each_token_is_new_and_rekeying_revokes_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "principals.toml"
    first = add_principal(path, "bot", ["team:a"], ["skills:read"])
    registry = PrincipalRegistry(path)
    assert registry.authenticate(first).name == "bot"
    second = add_principal(path, "bot", ["team:a"], ["skills:read"])
    assert second != first and second.startswith("sks_") and len(second) > 40
    with pytest.raises(UnauthenticatedError):
        registry.authenticate(first)  # the file changed on disk: the registry re-reads it
    assert registry.authenticate(second).name == "bot"
    assert remove_principal(path, "bot") is True
    with pytest.raises(UnauthenticatedError):
        registry.authenticate(second)
    assert remove_principal(path, "bot") is False


def test_star_grant_is_every_grant(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    token = add_principal(path, "ops", ["*"], ["skills:read", "memory:read"])
    assert PrincipalRegistry(path).authenticate(token).grants is None


@pytest.mark.parametrize(
    ("name", "grants", "scopes", "fragment"),
    [
        ("bad name", ["team:a"], ["skills:read"], "invalid principal name"),
        ("bot", ["team a"], ["skills:read"], "invalid grant"),
        ("bot", ["team:a"], ["root"], "invalid scope"),
        ("bot", [], ["skills:read"], "at least one --grant"),
    ],
)
def test_invalid_principals_are_refused(tmp_path: Path, name: str, grants: list[str], scopes: list[str],
                                        fragment: str) -> None:
    path = tmp_path / "p.toml"
    with pytest.raises(ValidationError, match=fragment):
        add_principal(path, name, grants, scopes)
    assert not path.exists()


def test_hand_written_file_errors_are_clear(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[principals.bot]\ntoken_sha256 = "abc"\ngrants = ["team:a"]\nscopes = []\n')
    with pytest.raises(ValidationError, match="64 lowercase hex"):
        PrincipalRegistry(path)
    path.write_text("[principals.bot\n")
    with pytest.raises(ValidationError, match="unreadable"):
        PrincipalRegistry(path)


@pytest.mark.parametrize("header", [None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer    ", "Bearer " + "x" * 600])
def test_malformed_authorization_headers_are_unauthenticated(header: str | None) -> None:
    with pytest.raises(UnauthenticatedError):
        bearer_token(header)


def test_bearer_scheme_is_case_insensitive() -> None:
    assert bearer_token("bearer abc") == "abc"


def test_wrong_and_prefix_tokens_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    token = add_principal(path, "bot", ["team:a"], ["skills:read"])
    registry = PrincipalRegistry(path)
    for guess in (token[:-1], token + "x", token.upper(), hash_token(token), ""):
        with pytest.raises(UnauthenticatedError, match="invalid bearer token"):
            registry.authenticate(guess)


def test_demo_principal_only_on_request(tmp_path: Path) -> None:
    with pytest.raises(UnauthenticatedError):
        PrincipalRegistry(tmp_path / "none.toml").authenticate(DEMO_TOKEN)
    demo = PrincipalRegistry(tmp_path / "none.toml", demo=True).authenticate(DEMO_TOKEN)
    assert demo.grants == frozenset({"sub:starter-pack", "team:data-science"})
    assert "sub:ops-pro" not in demo.grants
    assert demo.has_scope("memory:read") and demo.has_scope("skills:read")


def test_require_scope() -> None:
    p = Principal("p", frozenset({"team:a"}), frozenset({"memory:read"}))
    require_scope(p, "memory:read")
    with pytest.raises(AccessDeniedError) as info:
        require_scope(p, "skills:read")
    assert info.value.details == {"required_scope": "skills:read"}


def test_sample_catalog_detection(sample: Catalog, empty_catalog: Catalog) -> None:
    assert sample.runs_on_sample() is True
    assert PrincipalRegistry.for_catalog(sample).demo is True
    assert empty_catalog.runs_on_sample() is False


def test_a_catalog_with_other_skills_has_no_demo_principal(fresh_sample: Catalog, tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "local-note"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: local-note\ndescription: A note of our own.\n---\nRead me.\n")
    registry = PrincipalRegistry.for_catalog(fresh_sample)  # as a running server holds it
    assert registry.authenticate(DEMO_TOKEN).name == "demo"
    report = fresh_sample.import_path(tmp_path / "skills", "local", "team:local")
    assert report.ok and report.created
    assert fresh_sample.runs_on_sample() is False
    assert registry.demo is False
    # The demo ends as soon as the catalog holds other skills, and the refusal says so, not "invalid".
    with pytest.raises(UnauthenticatedError, match=r"works only while the server runs on the bundled sample"):
        registry.authenticate(DEMO_TOKEN)


def test_token_cli_prints_the_token_once(tmp_path: Path) -> None:
    out = io.StringIO()
    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "token", "add", "bot", "--grant", "team:a", "--scope", "skills:read",
                 "--json"], out=out) == 0
    payload = json.loads(out.getvalue())
    token = payload["token"]
    assert payload["scopes"] == ["skills:read"] and payload["file"].endswith("principals.toml")
    assert token not in Path(payload["file"]).read_text(encoding="utf-8")
    listed = io.StringIO()
    assert main(["--data-dir", data, "token", "list", "--json"], out=listed) == 0
    assert json.loads(listed.getvalue()) == {
        "principals": [{"name": "bot", "grants": ["team:a"], "scopes": ["skills:read"]}]
    }
    assert token not in listed.getvalue()
    bad = io.StringIO()
    assert main(["--data-dir", data, "token", "add", "x y", "--grant", "team:a", "--json"], out=bad) == 1
    assert json.loads(bad.getvalue())["error"]["code"] == "VALIDATION_ERROR"
    assert main(["--data-dir", data, "token", "remove", "bot"], out=io.StringIO()) == 0
    assert main(["--data-dir", data, "token", "remove", "bot"], out=io.StringIO()) == 1


def test_a_rekeyed_token_stops_working_on_a_server_even_within_one_timestamp_tick(tmp_path: Path) -> None:
    """Re-keying a principal (same name, grants and scopes) writes a file of the same size; when both writes
    fall in one tick of the file system's clock (coarse on some file systems, or an mtime a deploy tool
    kept), the file's mtime and size are unchanged and the running server kept the old entries: the revoked
    token went on reading, the new one was refused. The file is replaced by a rename, so its inode says it
    changed. A real ``serve`` process over HTTP; ``os.utime`` plays the coarse clock."""
    import os

    import httpx
    from fleetsupport import ServeProcess

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = data_dir / "principals.toml"
    old = add_principal(path, "bot", ["sub:starter-pack"], ["skills:read"])
    server = ServeProcess(data_dir)
    try:
        def status(token: str) -> int:
            return httpx.get(server.url + "/v1/skills", headers={"Authorization": f"Bearer {token}"},
                             timeout=30).status_code

        assert status(old) == 200  # the server has read the file
        before = path.stat()
        new = add_principal(path, "bot", ["sub:starter-pack"], ["skills:read"])
        assert path.stat().st_size == before.st_size
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert status(old) == 401
        assert status(new) == 200
    finally:
        server.stop()


def test_a_principals_file_copied_in_place_keeps_its_tokens_while_it_is_being_written(tmp_path: Path) -> None:
    """An operator gives every replica the fleet's principals file with ``cp`` (truncate, then write): a
    request that read the file in between found no principal, and valid tokens were answered 401 (84 of 851
    searches while the file was copied 300 times onto a live replica). A file changed less than
    ``WRITE_GRACE_S`` ago that is empty or unreadable is taken for one still being written; the clock is the
    registry's, fixed here at the file's own mtime so nothing depends on how fast this test runs."""
    from skillsearch.http.auth import WRITE_GRACE_S

    path = tmp_path / "principals.toml"
    token = add_principal(path, "bot", ["sub:starter-pack"], ["skills:read"])
    whole = path.read_bytes()
    now = {"t": 0.0}
    registry = PrincipalRegistry(path, clock=lambda: now["t"])
    now["t"] = path.stat().st_mtime
    assert registry.authenticate(token).name == "bot"

    path.write_bytes(b"")  # cp's O_TRUNC, before its write
    now["t"] = path.stat().st_mtime
    assert registry.authenticate(token).name == "bot"
    path.write_bytes(whole[: len(whole) - 20])  # a read in the middle of the write: not TOML
    now["t"] = path.stat().st_mtime
    assert registry.authenticate(token).name == "bot"
    path.write_bytes(whole)
    assert registry.authenticate(token).name == "bot"

    # Left empty or broken past the grace, it is what it says: no principal, or fail closed.
    path.write_bytes(b"")
    now["t"] = path.stat().st_mtime + WRITE_GRACE_S + 1
    with pytest.raises(UnauthenticatedError, match="invalid bearer token"):
        registry.authenticate(token)
    path.write_bytes(whole[: len(whole) - 20])
    now["t"] = path.stat().st_mtime + WRITE_GRACE_S + 1
    with pytest.raises(UnauthenticatedError, match="authentication is unavailable"):
        registry.authenticate(token)


def test_a_whole_principals_file_revokes_at_once_even_just_written(tmp_path: Path) -> None:
    """The grace is for a file caught mid-write only: a complete file that no longer holds a token (``token
    remove``, or a copy of the fleet's file without it) refuses that token at its first read."""
    path = tmp_path / "principals.toml"
    token = add_principal(path, "bot", ["sub:starter-pack"], ["skills:read"])
    other = add_principal(path, "other", ["sub:starter-pack"], ["skills:read"])
    now = {"t": path.stat().st_mtime}
    registry = PrincipalRegistry(path, clock=lambda: now["t"])
    assert registry.authenticate(token).name == "bot"
    assert remove_principal(path, "bot")
    now["t"] = path.stat().st_mtime
    with pytest.raises(UnauthenticatedError, match="invalid bearer token"):
        registry.authenticate(token)
    assert registry.authenticate(other).name == "other"
    assert remove_principal(path, "other")  # the last one: a file with no principal, not an empty file
    with pytest.raises(UnauthenticatedError, match="invalid bearer token"):
        registry.authenticate(other)
