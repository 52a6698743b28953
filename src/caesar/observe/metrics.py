"""The deployment's statistics (one dict per service actor, as
`ServiceActor.stats()` returns them) as Prometheus metric families.

Counters are the actors' own totals since they started (a restarted actor
starts again from zero, which Prometheus' rate() handles as a reset)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

Stats = Mapping[str, Sequence[Mapping[str, Any]]]  # service -> one dict per actor
LABELS = ["service", "actor"]


def _buckets(hist: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Cumulative buckets in seconds from a LatencyHistogram.as_dict()."""
    out, running = [], 0
    bounds = [*hist["bounds_ms"], float("inf")]
    for bound, n in zip(bounds, hist["counts"], strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound / 1000), float(running)))
    return out


def families(stats: Stats) -> list[Metric]:
    counter = {name: CounterMetricFamily(f"caesar_{name}", doc, labels=LABELS) for name, doc in (
        ("records_in", "records consumed from the service's input topics"),
        ("records_out", "records produced by the service"),
        ("batches", "input batches handled"),
        ("commits", "commits (outputs, state and input offsets)"))}
    up = GaugeMetricFamily("caesar_actor_up", "1 while the actor's loop runs", labels=LABELS)
    uptime = GaugeMetricFamily("caesar_actor_uptime_seconds", "since the actor (re)started",
                               labels=LABELS)
    lag = GaugeMetricFamily("caesar_consumer_lag_records",
                            "input records not handled yet (end offset - position)",
                            labels=LABELS)
    state = GaugeMetricFamily("caesar_state_bytes", "size of the newest checkpointed state "
                              "(compressed)", labels=LABELS)
    dead = CounterMetricFamily("caesar_dead_letters", "input records dead-lettered, by reason",
                               labels=[*LABELS, "reason"])
    skipped = CounterMetricFamily("caesar_skipped_events", "events the router did not send to "
                                  "a suspended query (its context did not hold)",
                                  labels=[*LABELS, "plan"])
    hop = HistogramMetricFamily("caesar_hop_latency_seconds", "Kafka timestamp of a batch's "
                                "oldest input record -> the service handling it",
                                labels=LABELS)
    alert = HistogramMetricFamily("caesar_alert_latency_seconds", "input record's Kafka "
                                  "timestamp -> the alert it triggered, encoded by the matcher",
                                  labels=LABELS)
    for service, actors in stats.items():
        for i, s in enumerate(actors):
            labels = [service, str(s.get("actor", f"{service}-{i}"))]
            for name, family in counter.items():
                family.add_metric(labels, float(s.get(name, 0)))
            up.add_metric(labels, 1.0 if s.get("alive") else 0.0)
            uptime.add_metric(labels, float(s.get("uptime_s", 0.0)))
            if s.get("lag") is not None:
                lag.add_metric(labels, float(s["lag"]))
            state.add_metric(labels, float(s.get("state_bytes", 0)))
            for reason, n in s.get("dead_letters_by_reason", {}).items():
                dead.add_metric([*labels, reason], float(n))
            for plan, n in s.get("skipped_events", {}).items():
                skipped.add_metric([*labels, plan], float(n))
            if "hop_ms" in s:
                hop.add_metric(labels, _buckets(s["hop_ms"]), s["hop_ms"]["sum_ms"] / 1000)
            if "alert_latency_ms" in s:
                h = s["alert_latency_ms"]
                alert.add_metric(labels, _buckets(h), h["sum_ms"] / 1000)
    return [*counter.values(), up, uptime, lag, state, dead, skipped, hop, alert]


class DeploymentCollector(Collector):
    """Collects on scrape: asks the actors for their statistics."""

    def __init__(self, stats: Callable[[], Stats]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        yield from families(self.stats())
