"""The single visibility rule (design section 1), used by every read.

A skill is visible to a principal iff it is active, its grant is in the principal's set and, for a
subscription grant, that subscription is not revoked. It is evaluated at query time, not at sync time.
"""

from __future__ import annotations

from collections.abc import Iterable

from skillsearch.core.domain import Principal

__all__ = ["is_grant_revoked", "is_visible", "visible_grants"]


def is_grant_revoked(grant: str, revoked_subscriptions: frozenset[str]) -> bool:
    kind, _, ident = grant.partition(":")
    return kind == "sub" and ident in revoked_subscriptions


def visible_grants(
    principal: Principal, catalog_grants: Iterable[str], revoked_subscriptions: frozenset[str]
) -> frozenset[str]:
    """The grant keys whose active skills this principal may see right now."""
    candidates = set(catalog_grants) if principal.grants is None else set(principal.grants)
    return frozenset(g for g in candidates if not is_grant_revoked(g, revoked_subscriptions))


def is_visible(status: str, grant: str, principal: Principal, revoked_subscriptions: frozenset[str]) -> bool:
    if status != "active" or is_grant_revoked(grant, revoked_subscriptions):
        return False
    return principal.grants is None or grant in principal.grants
