"""Prometheus metrics: the one home of ``prometheus_client``.

Each app gets its own :class:`CollectorRegistry`, so several apps in one process (tests, an embedded
server) never collide on metric names. Route labels are route *templates* (``/v1/skills/{skill_id}``),
never raw paths, so a scan of random URLs cannot blow up the number of series. Index size and the age
of the last successful sync are read from the catalog at scrape time, not pushed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from skillsearch.sync.health import SyncHealth

__all__ = ["CONTENT_TYPE", "HttpMetrics", "Operations", "sync_age_seconds"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Request latencies: sub-millisecond (health) to a few seconds (a cold model).
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def sync_age_seconds(last_success: list[str | None], now: float | None = None) -> float | None:
    """Seconds since the most recent successful sync of any source; ``None`` if none ever succeeded."""
    stamps = []
    for text in last_success:
        if not text:
            continue
        try:
            stamps.append(datetime.fromisoformat(text).timestamp())
        except ValueError:
            continue
    if not stamps:
        return None
    return max(0.0, (time.time() if now is None else now) - max(stamps))


def _no_health() -> Sequence[SyncHealth]:
    return ()


@dataclass(frozen=True)
class Operations:
    """What a serving process knows of its own sync duties, for ``/metrics`` and ``/readyz``: whether it is
    the data directory's writer (``sync/leader.py``), each configured sync's health, and the bound past which
    a failing sync makes ``/readyz`` say ``degraded``."""

    writer: Callable[[], bool] = field(default=lambda: False)
    health: Callable[[], Sequence[SyncHealth]] = field(default=_no_health)
    degraded_after_s: float = 900.0


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


class _OperationsCollector(Collector):
    def __init__(self, ops: Operations, generation: Callable[[], int]) -> None:
        self._ops = ops
        self._generation = generation

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("skillsearch_index_generation",
                                "The catalog generation the index this process serves reflects (-1: none).",
                                value=self._generation())
        yield GaugeMetricFamily("skillsearch_sync_writer",
                                "1 when this process runs sync and the source watchers (holds leader.lock).",
                                value=1 if self._ops.writer() else 0)
        age = GaugeMetricFamily("skillsearch_sync_last_success_age_seconds",
                                "Seconds since each configured subscription or source last synced (NaN: never).",
                                labels=["kind", "name"])
        failing = GaugeMetricFamily("skillsearch_sync_failing_seconds",
                                    "How long each sync has been failing (0: its last attempt succeeded).",
                                    labels=["kind", "name"])
        for h in self._ops.health():
            age.add_metric([h.kind, h.name], _nan(h.last_success_age_s))
            failing.add_metric([h.kind, h.name], h.failing_for_s or 0.0)
        yield age
        yield failing


class _CatalogCollector(Collector):
    def __init__(self, documents: Callable[[], int], skills: Callable[[], int],
                 sync_age: Callable[[], float | None], batches: Callable[[], dict[str, Any] | None]) -> None:
        self._documents = documents
        self._skills = skills
        self._sync_age = sync_age
        self._batches = batches

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        b = self._batches() or {}
        for key, help_text in (("batches", "Model calls made by the batching query encoder."),
                               ("requests", "Requests those calls encoded (requests / batches = mean batch size)."),
                               ("failed_batches", "Model calls that failed (each failed only its own requests).")):
            yield CounterMetricFamily(f"skillsearch_query_encoder_{key}", help_text, value=b.get(key, 0))
        yield GaugeMetricFamily("skillsearch_query_encoder_largest_batch", "Most requests one model call encoded.",
                                value=b.get("largest", 0))
        yield GaugeMetricFamily("skillsearch_index_documents", "Skills in the search index.", value=self._documents())
        yield GaugeMetricFamily("skillsearch_catalog_skills", "Skills in the catalog store (any status).",
                                value=self._skills())
        age = self._sync_age()
        yield GaugeMetricFamily(
            "skillsearch_last_sync_age_seconds",
            "Seconds since the last successful sync of any source (NaN when none has succeeded).",
            value=float("nan") if age is None else age,
        )


class HttpMetrics:
    """Request counts and latencies by route and status, search latency by mode, catalog gauges, and the
    batching query encoder's counters (``batches``: its stats as a dict, None before the first search)."""

    def __init__(
        self,
        documents: Callable[[], int],
        skills: Callable[[], int],
        sync_age: Callable[[], float | None],
        batches: Callable[[], dict[str, Any] | None] = lambda: None,
        operations: Operations | None = None,
        generation: Callable[[], int] = lambda: -1,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "skillsearch_http_requests", "HTTP requests by route template, method and status.",
            ["route", "method", "status"], registry=self.registry,
        )
        self.latency = Histogram(
            "skillsearch_http_request_duration_seconds", "HTTP request latency by route template and status.",
            ["route", "method", "status"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.search_latency = Histogram(
            "skillsearch_search_duration_seconds", "Time spent in the search use case, by mode.",
            ["mode"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.registry.register(_CatalogCollector(documents, skills, sync_age, batches))
        self.registry.register(_OperationsCollector(operations or Operations(), generation))

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        labels = (route, method, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def observe_search(self, mode: str, seconds: float) -> None:
        self.search_latency.labels(mode).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
