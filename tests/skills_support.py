"""Helpers for the MCP Skills extension tests: raw JSON-RPC requests through the SDK's client session, and
reading a listing and its files back the way a host verifies them (digest, size, front matter)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from mcp import Client
from mcp_types import BlobResourceContents, Request, TextResourceContents
from pydantic import TypeAdapter

from skillsearch.catalog.frontmatter import split_front_matter

EXTENSION_ID = "io.modelcontextprotocol/skills"
_ANY = TypeAdapter(dict[str, Any])


class RawRequest(Request[dict[str, Any] | None, str]):
    """A request of a method the SDK's client has no typed call for (``skills/list``, ...)."""

    method: str
    params: dict[str, Any] | None = None


async def call(client: Client, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return await client.session.send_request(RawRequest(method=method, params=params or {}), _ANY)


async def list_all(client: Client) -> tuple[list[dict[str, Any]], int]:
    """Every entry of ``skills/list``, following ``nextCursor``; and the number of pages."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await call(client, "skills/list", {"cursor": cursor} if cursor else {})
        pages += 1
        assert page["ttlMs"] >= 0 and page["cacheScope"] in ("public", "private")
        entries += page["skills"]
        cursor = page.get("nextCursor")
        if not cursor:
            return entries, pages


async def read_bytes(client: Client, uri: str) -> tuple[bytes, str, bool]:
    """``(bytes, media type, came as text)`` of one ``resources/read``, from the server (the SDK client would
    otherwise answer a repeated read from its cache for ``ttlMs``)."""
    result = await client.read_resource(uri, cache_mode="bypass")
    [content] = result.contents
    assert content.uri == uri
    if isinstance(content, TextResourceContents):
        return content.text.encode("utf-8"), content.mime_type or "", True
    assert isinstance(content, BlobResourceContents)
    return base64.b64decode(content.blob), content.mime_type or "", False


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


async def verify_entry(client: Client, entry: dict[str, Any]) -> dict[str, bytes]:
    """What a host does before loading a skill: every listed file's bytes match its digest and size, and the
    SKILL.md's parsed front matter equals the entry's. Returns the files by URI."""
    files: dict[str, bytes] = {}
    for resource in entry["resources"]:
        data, _, _ = await read_bytes(client, resource["uri"])
        assert digest(data) == resource["digest"], resource["uri"]
        assert len(data) == resource["size"], resource["uri"]
        files[resource["uri"]] = data
    front, _ = split_front_matter(files[entry["uri"]].decode("utf-8"))
    assert front == entry["frontmatter"], entry["uri"]
    assert entry["uri"].split("/")[-2] == front["name"]
    return files
