"""What a running deployment shows about itself: Prometheus metrics, health
and readiness, and the live context view (which contexts hold for which
stream partition, when). Served over HTTP by the driver (`caesar deploy
--observe-port`); the pieces are pure where they can be (timeline, metrics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caesar.bus.kafka import KafkaBus
    from caesar.observe.feed import ContextFeed
    from caesar.observe.server import Observer
    from caesar.services.ray_runtime.deployment import Deployment


@dataclass
class Observation:
    """A running endpoint for one deployment; `stop()` ends it."""

    observer: Observer
    feed: ContextFeed
    bus: KafkaBus

    @property
    def url(self) -> str:
        return self.observer.url

    def stop(self) -> None:
        self.observer.stop()
        self.feed.stop()
        self.bus.close()


def observe(deployment: Deployment, *, host: str = "127.0.0.1", port: int = 9464) -> Observation:
    """Serve metrics, probes and the live context view of `deployment`."""
    from caesar.bus.kafka import KafkaBus
    from caesar.codecs import make_codec
    from caesar.errors import RuntimeEnvironmentError
    from caesar.observe.feed import ContextFeed
    from caesar.observe.server import Observer
    from caesar.observe.timeline import ContextTimeline

    settings = deployment.settings
    timeline = ContextTimeline()
    try:
        observer = Observer(deployment.stats, timeline, host=host, port=port,
                            model=deployment.plan.model)
    except OSError as exc:
        raise RuntimeEnvironmentError(f"cannot serve metrics and the context view on "
                                      f"{host}:{port}: {exc.strerror or exc} (choose another "
                                      "--observe-port, or 0 for none)") from None
    bus = KafkaBus(settings.kafka)
    feed = ContextFeed(bus, make_codec(settings), settings.topics.context_changes,
                       timeline).start()
    return Observation(observer.start(), feed, bus)
