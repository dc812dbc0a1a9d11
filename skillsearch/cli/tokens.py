"""``skillsearch token add|list|remove``: the bearer tokens of the principals file (only their sha256 is
stored; a new token is printed once)."""

from __future__ import annotations

import argparse
from typing import TextIO

from skillsearch.cli.common import Subparsers, add_command, emit, grant_or_all_arg, principals_path
from skillsearch.core.errors import ValidationError, problem

__all__ = ["add_commands"]


def cmd_token_add(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import KNOWN_SCOPES, add_principal

    path = principals_path(args)
    scopes = args.scope or list(KNOWN_SCOPES)
    token = add_principal(path, args.name, args.grant or [], scopes, replace=args.replace)
    payload = {"name": args.name, "token": token, "grants": args.grant, "scopes": scopes, "file": str(path)}
    emit(out, args, payload, lambda: (
        f"{token}\n"
        f"(principal {args.name!r} in {path}; this token is shown once and only its sha256 is stored)"
    ))
    return 0


def cmd_token_list(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import PrincipalRegistry

    registry = PrincipalRegistry(principals_path(args))
    rows = []
    for name in registry.names():
        p = registry.principal(name)
        rows.append({"name": name, "grants": ["*"] if p.grants is None else sorted(p.grants),
                     "scopes": sorted(p.scopes)})
    emit(out, args, {"principals": rows}, lambda: "\n".join(
        f"{r['name']}  grants={','.join(r['grants'])}  scopes={','.join(r['scopes'])}" for r in rows
    ) or "(no principals)")
    return 0


def cmd_token_remove(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import remove_principal

    path = principals_path(args)
    if not remove_principal(path, args.name):
        raise ValidationError(f"no principal {args.name!r} in {path} (skillsearch token list shows them)",
                              {"problems": [problem("name", f"no principal {args.name!r}")]})
    emit(out, args, {"name": args.name, "removed": True}, lambda: f"removed {args.name}")
    return 0


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "token", cmd_token_list, "manage bearer tokens of the principals file")
    tokens = p.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    for action, func, help_text in (
        ("add", cmd_token_add, "create a principal (or re-key it with --replace) and print its new token once"),
        ("list", cmd_token_list, "list principals with their grants and scopes (never tokens)"),
        ("remove", cmd_token_remove, "remove a principal"),
    ):
        t = tokens.add_parser(action, help=help_text, description=help_text)
        t.set_defaults(func=func)
        t.add_argument("--json", action="store_true", help="print one JSON object")
        t.add_argument("--principals", help="principals file (default <data-dir>/principals.toml)")
        if action != "list":
            t.add_argument("name", help="principal name: letters, digits, '.', '_', '-'")
        if action == "add":
            t.add_argument("--grant", action="append", metavar="G", required=True, type=grant_or_all_arg,
                           help="grant key the principal sees: sub:<id>, team:<id>, user:<id>, or * (repeatable)")
            t.add_argument("--replace", action="store_true",
                           help="re-key an existing principal: a new token, these grants and scopes")
            t.add_argument("--scope", action="append", metavar="S",
                           help="scope: skills:read, memory:read (repeatable; default both)")
