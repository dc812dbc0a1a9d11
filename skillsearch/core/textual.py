"""Whether a resource is text: the one rule every surface answers with, so recall, the Skills extension's
``resources/read``, the reference upstream and import agree on each file (text returned as text, the rest
as base64). A file is text when its media type is a textual one and its bytes are UTF-8."""

from __future__ import annotations

__all__ = ["TEXT_MEDIA_TYPES", "is_text", "is_text_media_type"]

# Prefixes of textual media types, and the application/* types that are source or configuration text
# (what Python's mimetypes and the importer's guesses give scripts: .sh, .js, .py, .toml).
TEXT_MEDIA_TYPES = (
    "text/",
    "application/json",
    "application/yaml",
    "application/x-yaml",
    "application/xml",
    "application/toml",
    "application/javascript",
    "application/x-sh",
    "application/x-shellscript",
    "application/x-python",
    "application/x-python-code",
    "application/sql",
)
_TEXT_SUFFIXES = ("+json", "+xml", "+yaml")


def is_text_media_type(media_type: str) -> bool:
    """Whether ``media_type`` (parameters such as ``; charset=utf-8`` allowed) names text."""
    base = media_type.split(";", 1)[0].strip().lower()
    return base.startswith(TEXT_MEDIA_TYPES) or base.endswith(_TEXT_SUFFIXES)


def is_text(media_type: str, content: bytes) -> bool:
    """Whether a resource of this media type and content is returned as text: a textual type and UTF-8."""
    if not is_text_media_type(media_type):
        return False
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
