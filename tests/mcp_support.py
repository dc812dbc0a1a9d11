"""Helpers shared by the MCP tests: reading tool results the way a client would."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp_types import CallToolResult

from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal

STARTER = Principal(name="starter", grants=frozenset({"sub:starter-pack"}), scopes=frozenset({SCOPE_MEMORY_READ}))
DATA_TEAM = Principal(name="data", grants=frozenset({"team:data-science"}), scopes=frozenset({SCOPE_MEMORY_READ}))
NO_SCOPE = Principal(name="noscope", grants=frozenset({"sub:starter-pack"}), scopes=frozenset())
ROOT = Path(__file__).resolve().parents[1]


def stdio_params(data_dir: Path, *extra: str) -> StdioServerParameters:
    """``skillsearch mcp`` over stdio on ``data_dir`` as a real subprocess of this checkout (offline)."""
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "skillsearch.cli", "-q", "mcp", "--data-dir", str(data_dir), *extra],
        env=env, cwd=str(ROOT),
    )


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a successful call; its text content is the same JSON."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    """``{code, message, details}`` of an error result: under ``error`` for the catalog tools, in the
    ``data`` of an ``kind="error"`` envelope for recall_cloud_skill."""
    assert result.is_error, result.structured_content
    content = result.structured_content
    assert content is not None
    assert json.loads(result.content[0].text) == content  # type: ignore[union-attr]
    if content.get("object") == "cloud_skill":
        assert content["kind"] == "error" and content["render_status"] == "error"
        payload: dict[str, Any] = content["data"]
    else:
        payload = content["error"]
    assert set(payload) == {"code", "message", "details"}
    assert "Traceback" not in payload["message"]
    return payload
