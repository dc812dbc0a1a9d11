"""The YAML front matter of ``SKILL.md``: PyYAML's home, with a loader that refuses anchors and aliases.

An alias bomb (``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]`` nested nine times) is a few hundred bytes
that expand to a billion nodes, and ``name: *a6`` to a string of tens of millions of characters; front
matter has no use for aliases, so the first anchor or alias refuses the file. Its size is bounded before
parsing, a deeply nested value is refused instead of overflowing the stack, and values are reduced to JSON
(dates become ISO strings, other tags their text). Writing (``dump_front_matter``) is here too, for the
SKILL.md the Skills extension renders (``catalog/skill_md.py``). PyYAML is imported by the first parse or
dump, not with this module: a command that only reads the catalog (``list``, ``mcp`` up to its first
answer) needs neither.
"""

from __future__ import annotations

import datetime
import functools
import re
from typing import TYPE_CHECKING, Any

from skillsearch.core.limits import Limits
from skillsearch.core.wellformed import is_unicode

if TYPE_CHECKING:
    import yaml

__all__ = ["FRONT_MATTER", "FrontMatterError", "dump_front_matter", "is_plain_scalar", "load_front_matter",
           "split_front_matter"]

FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_OPENED = re.compile(r"\A---[ \t]*(?:\r?\n|\Z)")


class FrontMatterError(ValueError):
    """The text has no usable YAML front matter; the message says why (and where, when YAML knows)."""


@functools.cache
def _no_alias_loader() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader, refusing every anchor (``&name``) and alias (``*name``) as it composes: where
    PyYAML was built without libyaml (``_load``)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            _refuse_anchor(self.peek_event())
            return super().compose_node(parent, index)

    return NoAliasLoader


def _refuse_anchor(event: Any) -> None:
    import yaml

    if isinstance(event, yaml.events.AliasEvent):
        raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed", event.start_mark)
    if getattr(event, "anchor", None) is not None:
        raise yaml.composer.ComposerError(None, None, "YAML anchors (&name) are not allowed", event.start_mark)


def _load(text: str) -> Any:
    """``text`` parsed by PyYAML's safe loader, no anchor or alias allowed. With libyaml (PyYAML's wheels
    carry it) the events are read in C first, refused on the first anchor or alias, and the document then
    loaded in C: 0.13 s for the 883 real skills' front matter against 0.85 s in PyYAML's Python parser,
    whose composer the no-alias rule otherwise hooks. libyaml also bounds nesting (1,000 levels)."""
    import yaml

    if not getattr(yaml, "__with_libyaml__", False) or not is_unicode(text):
        # libyaml takes UTF-8, which a lone surrogate is not: PyYAML's reader names the character instead
        return yaml.load(text, Loader=_no_alias_loader())  # a SafeLoader subclass
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        _refuse_anchor(event)
    return yaml.load(text, Loader=yaml.CSafeLoader)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            return str(value)
        return value
    return str(value)


def load_front_matter(text: str, limits: Limits | None = None) -> dict[str, Any]:
    """The front matter block as a JSON object; :class:`FrontMatterError` with the reason when refused."""
    limits = limits or Limits()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_front_matter_bytes:
        raise FrontMatterError(f"front matter is {size} bytes, over the limit of {limits.max_front_matter_bytes}")
    # The block ends with the line break before the closing '---': without it, PyYAML would drop the final
    # line break of a block scalar (``description: |``) that other parsers (the JavaScript ``yaml`` hosts use)
    # keep, and the host's front matter would differ from the listing's.
    import yaml

    try:
        meta = _jsonable(_load(text + "\n"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        if problem == "exceeded maximum nesting depth":  # libyaml's bound, said as the Python parser's is
            problem = "nested too deeply"
        raise FrontMatterError(f"bad front matter{where}: {problem}") from None
    except RecursionError:
        raise FrontMatterError("bad front matter: nested too deeply") from None
    if not isinstance(meta, dict):
        raise FrontMatterError("bad front matter: expected a mapping of keys to values")
    return meta


def split_front_matter(text: str, limits: Limits | None = None) -> tuple[dict[str, Any], str]:
    """(the parsed front matter, the Markdown body) of a ``SKILL.md``."""
    match = FRONT_MATTER.match(text.removeprefix("\ufeff"))
    if not match:
        if _OPENED.match(text.removeprefix("\ufeff")):  # a file cut short, as a watcher may read one mid-write
            raise FrontMatterError("the front matter is not closed (no line '---' after it)")
        raise FrontMatterError("no YAML front matter (the file must start with a line '---')")
    return load_front_matter(match.group(1), limits), match.group(2)


def dump_front_matter(front: dict[str, Any]) -> str:
    """``front`` as YAML in the given key order (block style, no line folding)."""
    import yaml

    return str(yaml.safe_dump(front, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1_000_000))


def is_plain_scalar(text: str) -> bool:
    """Whether ``text`` reads back from YAML as itself (so it can stand unquoted)."""
    import yaml

    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False
