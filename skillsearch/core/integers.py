"""What "integer" means wherever a caller's JSON value is checked against it: JSON Schema's reading.

JSON Schema (2020-12 validation, section 6.1.1, and the core's section 4.2.2) counts a number whose fractional
part is zero as an integer: ``5.0`` is the integer 5, as ``5`` is. LLM hosts' JSON writers do send ``5.0``
for an integer argument. So a resolve parameter of type ``integer``, an MCP tool's integer argument and an
HTTP body's integer field take ``5.0`` as 5 (a step's ``{n}`` becomes ``5``, never ``5.0``), while ``5.5``,
booleans and strings (``"5"``) stay refused, as the schema says. HTTP query parameters are text, and
``limit=3.0`` reads as 3 there too.

A float past 2**53 is refused all the same: from there a JSON number written with a fraction or an exponent
no longer holds every integer, so ``9007199254740993.0`` would arrive as ...992 and be used as a value the
caller never sent (I-JSON, RFC 7493 section 2.2, keeps integers within that range for this reason).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Strict

__all__ = ["EXACT_FLOAT_INTEGERS", "JsonInt", "as_integer"]

EXACT_FLOAT_INTEGERS = 2**53


def as_integer(value: Any) -> Any:
    """``value`` as JSON Schema's ``integer`` reads it: a float with no fractional part, within 2**53, becomes
    that int (``5.0`` -> 5); every other value comes back unchanged (``5.5``, ``True``, ``"5"``, ``1e300``), for
    the type check that follows to refuse or take."""
    if type(value) is float and value.is_integer() and abs(value) <= EXACT_FLOAT_INTEGERS:
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(as_integer), Strict()]
"""A pydantic ``int`` that takes what JSON Schema's ``integer`` takes and nothing else: ``3`` and ``3.0``,
never ``"3"``, ``true`` or ``3.5`` (a lax ``int`` takes the first two, a strict one refuses ``3.0``). Its JSON
schema stays ``{"type": "integer"}``."""
