"""The ``skillsearch`` command line (the entry layer): it composes the surfaces, which never import each
other. ``main.py`` holds the parser and ``main()``; one module per command group holds its commands;
``serve.py`` is the composition of the serve process; ``usage.py`` what the command line refuses before a
command runs (usage errors, exit code 2) and how."""

from __future__ import annotations

from skillsearch.cli.main import build_parser, main
from skillsearch.cli.mcp import mcp_principal_from_args, mcp_server_from_args, principal_from_file
from skillsearch.cli.serve import build_serve_app

__all__ = [
    "build_parser",
    "build_serve_app",
    "main",
    "mcp_principal_from_args",
    "mcp_server_from_args",
    "principal_from_file",
]
