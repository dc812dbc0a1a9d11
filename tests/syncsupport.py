"""Helpers shared by the sync tests: serve an ASGI app over real HTTP on 127.0.0.1, build sync settings."""

from __future__ import annotations

from typing import Any

from skillsearch.catalog.sample import sample_catalog_dir
from skillsearch.http.server import ServerThread
from skillsearch.retrieval.documents import doc_hash as _doc_hash  # the index's own freshness key: the honest thing to compare
from skillsearch.service import Catalog
from skillsearch.sync.config import SubscriptionConfig, SyncConfig, UpstreamConfig
from skillsearch.upstream.platform import ReferenceUpstream, WebhookTarget

TOKEN = "test-token"
SECRET = "test-webhook-secret"
STARTER = sample_catalog_dir() / "starter"


def serve(app: Any, lifespan: str = "off") -> ServerThread:
    """``with serve(app) as url:`` runs ``app`` over real HTTP on a free port of 127.0.0.1 (no lifespan
    unless asked: the sync tests drive the catalog themselves)."""
    return ServerThread(app, lifespan=lifespan, timeout_graceful_shutdown=1)


def upstream_with_starter(subscription_id: str = "starter-pack", webhook_url: str | None = None) -> ReferenceUpstream:
    up = ReferenceUpstream([TOKEN], WebhookTarget(webhook_url, SECRET) if webhook_url else None)
    assert up.load(subscription_id, STARTER) == []
    assert up.load(subscription_id, STARTER / "flows.json") == []
    return up


def config_for(url: str, *subscriptions: str, interval_s: float = 60.0, **upstream: Any) -> SyncConfig:
    values: dict[str, Any] = {"timeout_s": 5.0, "retries": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
                              "page_limit": 100, "webhook_secret": SECRET}
    values.update(upstream)
    return SyncConfig(UpstreamConfig(url=url, token=TOKEN, **values),
                      tuple(SubscriptionConfig(s, interval_s) for s in subscriptions))


def catalog_content(catalog: Catalog, source: str) -> dict[str, tuple[str, str, str, tuple[str, ...]]]:
    """What the store holds for a source: skill id -> (status, name, description, sorted resource hashes)."""
    out = {}
    skills = catalog.store.skills(catalog.store.skill_ids_of_source(source))
    for sid, s in skills.items():
        rev = catalog.store.revision(s.current_revision_id)
        assert rev is not None, f"{sid} points at a missing revision"
        res = tuple(sorted(r.sha256 for r in catalog.store.resources(rev.revision_id)))
        out[sid] = (s.status, rev.name, rev.description, res)
    return out


def upstream_content(up: ReferenceUpstream, subscription_id: str) -> dict[str, tuple[str, str, str, tuple[str, ...]]]:
    out = {}
    for sid, item in up.feed(subscription_id).live().items():
        res = tuple(sorted(r["sha256"] for r in item["resources"]))
        out[sid] = (item["skill"]["status"], item["revision"]["name"], item["revision"]["description"], res)
    return out


def index_matches_store(catalog: Catalog) -> None:
    """The index holds exactly the store's active skills, each with its current content hash."""
    idx = catalog.index()
    snap = idx.snapshot()
    rows = {r.skill_id: r for r in catalog.store.index_rows()}
    assert {r.skill_id: r.doc_hash for r in snap.vectors.rows} == {s: _doc_hash(r) for s, r in rows.items()}
    assert idx.lexical.num_docs() == len(rows)
    assert snap.generation == catalog.store.generation()
