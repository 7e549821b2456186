"""What ``/metrics`` reports, in the Prometheus text format (prometheus-client).

Off unless the config's ``metrics`` is set. The counters are prometheus-client's own,
each in a registry of this server's (never the library's global one). With
``--workers N`` the parent names a private folder under the data folder in
``PROMETHEUS_MULTIPROC_DIR`` before any worker starts; each worker's values then live
in files there and a scrape, answered by whichever worker gets it, adds them all up.

Per request the cost is a dictionary lookup for the route's children and three
updates; what other parts count in plain integers (the listing cache's hits) is
copied into the counters at scrape time and every few seconds, so a worker that did
not answer the scrape still reports.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
REQUEST_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
# The task states, as ``models.TaskState`` numbers them (AList's).
TASK_STATES = {
    0: "pending",
    1: "running",
    2: "succeeded",
    3: "canceling",
    4: "canceled",
    5: "errored",
    6: "failing",
    7: "failed",
    8: "waiting_retry",
    9: "before_retry",
}


def multiprocess_folder(data_dir: Path) -> Path:
    """The private folder the workers of one server keep their values in."""
    return data_dir / "metrics"


def prepare_multiprocess(data_dir: Path) -> Path:
    """Empty the workers' folder and name it in the environment (before they start)."""
    folder = multiprocess_folder(data_dir)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    os.environ[MULTIPROC_ENV] = str(folder)
    return folder


def worker_gone(pid: int) -> None:
    """Forget the gauges of a worker that ended (its counters stay counted)."""
    if os.environ.get(MULTIPROC_ENV):
        mark_process_dead(pid)  # type: ignore[no-untyped-call]


class Metrics:
    """The server's counters, and the text a scrape answers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "manifold_http_requests",
            "HTTP requests answered, by route template, method and status",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "manifold_http_request_duration_seconds",
            "Time from a request's arrival to its last byte, by route template",
            ("route",),
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.sent = Counter(
            "manifold_http_response_bytes",
            "Response body bytes sent, by route template",
            ("route",),
            registry=self.registry,
        )
        self.list_cache = Counter(
            "manifold_list_cache_lookups",
            "Listing cache lookups, by result (hit, miss)",
            ("result",),
            registry=self.registry,
        )
        self.storage_calls = Histogram(
            "manifold_storage_call_duration_seconds",
            "Driver calls and their time, by storage mount path and call",
            ("storage", "call"),
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self.storage_errors = Counter(
            "manifold_storage_errors",
            "Driver calls that failed, by storage mount path, call and error class",
            ("storage", "call", "error"),
            registry=self.registry,
        )
        self._routes: dict[tuple[str, str, int], tuple[Any, Any, Any]] = {}
        self._calls: dict[tuple[str, str], Any] = {}
        self._cache_source: Callable[[], tuple[int, int]] | None = None
        self._cache_seen = (0, 0)
        self._task_counts: Callable[[], Iterable[tuple[str, int, int]]] | None = None

    def request(self, route: str, method: str, status: int, seconds: float, sent: int) -> None:
        """Count one answered request (the hot path: one lookup, three updates)."""
        key = (route, method, status)
        children = self._routes.get(key)
        if children is None:
            children = self._routes[key] = (
                self.requests.labels(route, method, str(status)),
                self.latency.labels(route),
                self.sent.labels(route),
            )
        children[0].inc()
        children[1].observe(seconds)
        if sent:
            children[2].inc(sent)

    def storage_call(self, storage: str, call: str, seconds: float, error: str | None) -> None:
        """A driver call ended (``vfs.layers.CallRecorder``)."""
        key = (storage, call)
        child = self._calls.get(key)
        if child is None:
            child = self._calls[key] = self.storage_calls.labels(storage, call)
        child.observe(seconds)
        if error is not None:
            self.storage_errors.labels(storage, call, error).inc()

    def watch_list_cache(self, source: Callable[[], tuple[int, int]]) -> None:
        """Where the listing cache's (hits, misses) so far are read."""
        self._cache_source = source

    def sync(self) -> None:
        """Copy what is counted elsewhere in plain integers into the counters."""
        if self._cache_source is not None:
            hits, misses = self._cache_source()
            seen_hits, seen_misses = self._cache_seen
            if hits > seen_hits:
                self.list_cache.labels("hit").inc(hits - seen_hits)
            if misses > seen_misses:
                self.list_cache.labels("miss").inc(misses - seen_misses)
            self._cache_seen = (hits, misses)

    def render(self, tasks: Iterable[tuple[str, int, int]] = ()) -> bytes:
        """The scrape's answer; ``tasks`` is (kind, state, count) read from the database."""
        self.sync()
        folder = os.environ.get(MULTIPROC_ENV)
        if folder:
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
        else:
            registry = self.registry
        text = generate_latest(registry)
        return text + generate_latest(_Once(_tasks_family(tasks)))


def _tasks_family(rows: Iterable[tuple[str, int, int]]) -> Metric:
    family = GaugeMetricFamily(
        "manifold_tasks", "Tasks in the database, by kind and state", labels=("kind", "state")
    )
    for kind, state, count in rows:
        family.add_metric((kind, TASK_STATES.get(state, str(state))), count)
    return family


class _Once:
    """A registry-like holder of one ready family, for ``generate_latest``."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterator[Metric]:
        yield self._family
