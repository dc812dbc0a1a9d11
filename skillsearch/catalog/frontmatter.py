"""The YAML front matter of ``SKILL.md``: PyYAML's home, with a loader that refuses anchors and aliases.

An alias bomb (``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]`` nested nine times) is a few hundred bytes
that expand to a billion nodes, and ``name: *a6`` to a string of tens of millions of characters; front
matter has no use for aliases, so the first anchor or alias refuses the file. Its size is bounded before
parsing, and a deeply nested value is refused instead of overflowing the stack.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from skillsearch.core.limits import Limits

__all__ = ["load_front_matter", "split_front_matter"]

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader, refusing every anchor (``&name``) and alias (``*name``) as it composes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.events.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "YAML anchors (&name) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


def load_front_matter(text: str, limits: Limits) -> Any:
    """The YAML front matter as Python values; ``ValueError`` with the reason when it is refused."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_front_matter_bytes:
        raise ValueError(f"front matter is {size} bytes, over the limit of {limits.max_front_matter_bytes}")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise ValueError(f"bad front matter{where}: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise ValueError("bad front matter: nested too deeply") from None


def split_front_matter(text: str, limits: Limits) -> tuple[Any, str]:
    """(the parsed front matter, the Markdown body) of a ``SKILL.md``."""
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if not match:
        raise ValueError("no YAML front matter (the file must start with a line '---')")
    return load_front_matter(match.group(1), limits), match.group(2)
