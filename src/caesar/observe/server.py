"""The driver's HTTP endpoint: Prometheus metrics, liveness and readiness
probes, and the live context view.

    GET /metrics        Prometheus text format (caesar_* families, metrics.py)
    GET /healthz        200 while the driver runs (liveness)
    GET /ready          200 when every service actor answers and runs, else 503
    GET /               the live context view (ui.html)
    GET /api/timeline   contexts per stream partition over event time (JSON)
    GET /api/stats      per service: records, rates, latency, lag (JSON)

It binds 127.0.0.1 unless told otherwise (the chart sets 0.0.0.0 in the pod).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from caesar.observe.metrics import DeploymentCollector, Stats
from caesar.observe.timeline import ContextTimeline

log = logging.getLogger(__name__)
UI = files("caesar.observe").joinpath("ui.html")
JSON = "application/json"


class CachedStats:
    """The actors' statistics, fetched at most once per `ttl_s` however often
    Prometheus and the page poll; remembers the previous fetch for rates."""

    def __init__(self, fetch: Callable[[], Stats], ttl_s: float = 1.0) -> None:
        self.fetch, self.ttl_s = fetch, ttl_s
        self._lock = threading.Lock()
        self._at = 0.0
        self._value: Stats = {}
        self.error: str | None = None
        self.previous: tuple[float, Stats] | None = None

    def __call__(self) -> Stats:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self.ttl_s:
                try:
                    value = self.fetch()
                    self.error = None
                except Exception as exc:  # an actor is away: report, do not crash the endpoint
                    log.warning("cannot fetch the actors' statistics: %s", exc)
                    self.error = f"{type(exc).__name__}: {exc}"
                    value = {}
                if self._value:
                    self.previous = (self._at, self._value)
                self._at, self._value = now, value
            return self._value

    def rates(self) -> dict[str, float]:
        """records_in per second per service since the previous fetch."""
        if self.previous is None:
            return {}
        then, old = self.previous
        span = max(self._at - then, 1e-9)
        return {service: (_total(self._value.get(service, ()), "records_in")
                          - _total(old.get(service, ()), "records_in")) / span
                for service in self._value}


def _total(actors: Sequence[Mapping[str, Any]], name: str) -> float:
    return float(sum(a.get(name, 0) for a in actors))


def _quantile(hists: Sequence[Mapping[str, Any]], q: float) -> float | None:
    """Upper bound (ms) of the bucket holding quantile q over several histograms."""
    if not hists:
        return None
    counts = [sum(h["counts"][i] for h in hists) for i in range(len(hists[0]["counts"]))]
    total = sum(counts)
    if not total:
        return None
    bounds = [*hists[0]["bounds_ms"], max(h["max_ms"] for h in hists)]
    running = 0
    for bound, n in zip(bounds, counts, strict=True):
        running += n
        if running >= q * total:
            return float(bound)
    return float(bounds[-1])


def stats_summary(stats: Stats, rates: Mapping[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for service, actors in stats.items():
        hops = [a["hop_ms"] for a in actors if "hop_ms" in a]
        alerts = [a["alert_latency_ms"] for a in actors if "alert_latency_ms" in a]
        lags = [a["lag"] for a in actors if a.get("lag") is not None]
        out[service] = {
            "actors": len(actors), "alive": sum(bool(a.get("alive")) for a in actors),
            "records_in": _total(actors, "records_in"),
            "records_out": _total(actors, "records_out"),
            "records_in_per_s": rates.get(service),
            "dead_letters": _total(actors, "dead_letters"),
            "lag": sum(lags) if lags else None,
            "hop_p50_ms": _quantile(hops, 0.5), "hop_p99_ms": _quantile(hops, 0.99),
            "alert_p50_ms": _quantile(alerts, 0.5), "alert_p99_ms": _quantile(alerts, 0.99)}
    return out


class Observer:
    """The HTTP endpoint of one deployment (a thread of the driver)."""

    def __init__(self, stats: Callable[[], Stats], timeline: ContextTimeline, *,
                 host: str = "127.0.0.1", port: int = 9464, model: str = "") -> None:
        self.stats = CachedStats(stats)
        self.timeline = timeline
        self.model = model
        registry = CollectorRegistry(auto_describe=False)
        registry.register(DeploymentCollector(self.stats))
        self.registry = registry
        self.server = ThreadingHTTPServer((host, port), _handler_for(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        name="caesar-observer", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Observer:
        self._thread.start()
        log.info("observing %s at %s (metrics /metrics, view /)", self.model, self.url)
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- responses
    def ready(self) -> tuple[bool, dict[str, Any]]:
        stats = self.stats()
        down = [f"{service}[{i}]" for service, actors in stats.items()
                for i, a in enumerate(actors) if not a.get("alive")]
        ok = bool(stats) and not down and self.stats.error is None
        return ok, {"ready": ok, "down": down, "error": self.stats.error}

    def api_stats(self) -> dict[str, Any]:
        stats = self.stats()
        return {"model": self.model, "services": stats_summary(stats, self.stats.rates()),
                "error": self.stats.error}

    def response(self, path: str) -> tuple[int, bytes, str]:
        """(status, body, content type) answering a GET of `path`."""
        if path == "/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if path == "/healthz":
            return 200, b"ok\n", "text/plain"
        if path == "/ready":
            ok, body = self.ready()
            return 200 if ok else 503, _json(body), JSON
        if path in ("/", "/ui"):
            return 200, UI.read_bytes(), "text/html; charset=utf-8"
        if path == "/api/timeline":
            return 200, _json({"model": self.model, **self.timeline.as_json()}), JSON
        if path == "/api/stats":
            return 200, _json(self.api_stats()), JSON
        return 404, b"not found\n", "text/plain"


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def _handler_for(observer: Observer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._send(*observer.response(self.path.split("?", 1)[0]))

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    return Handler
