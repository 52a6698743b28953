"""Input records of a flat integer schema are decoded in bulk by the
scheduler's runner (caesar/codecs/flat.py): the Linear Road model on the
in-memory bus gives the embedded pipeline's outputs, and a batch holding a
bad record falls back to record-by-record decoding, which dead-letters it."""

from __future__ import annotations

from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord
from caesar.codecs import SingleObjectCodec
from caesar.examples import model_path
from caesar.examples.linear_road.avro import repository
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import PositionReport
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import (
    BusPipeline,
    produce_inputs,
    read_alerts,
    read_dead_letters,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.settings import TopicSettings

MODEL = model_path("linear_road").with_name("model_per_segment.caesar")


def test_bulk_decoded_input_gives_the_embedded_outputs() -> None:
    plan = compile_model(MODEL)
    reports = [r for r in generate(GeneratorConfig(duration_s=240, scale=0.05, seed=3))
               if isinstance(r, PositionReport)]
    values = [{"type": "PositionReport", **rec} for _, rec in wire_records(reports, fanout=False)]
    expected = EmbeddedPipeline(plan).run_values(values, topic="lr-position-reports")
    cfg = ServiceConfig(plan=plan, topics=TopicSettings(partitions=2),
                        codec=SingleObjectCodec(repository()), partitions=(0, 1), actor_id="t")
    assert "lr-position-reports" in SchedulerHandler(cfg)._bulk_decoders(0)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.05, poll_timeout_s=0.01, batch_size=3000)
    produce_inputs(bus, cfg, values)
    # a truncated record in the middle: its batch is decoded record by record
    good = cfg.codec.encode("caesar.linear_road.PositionReport",
                            {k: v for k, v in values[-1].items() if k != "type"})
    bus.producer().produce([OutRecord("lr-position-reports", good[:-2], b"0|0", partition=0)])
    pipe.finish()
    got = sorted(a.identity() for a in read_alerts(bus, cfg))
    assert len(got) > 100
    assert got == sorted(a.identity() for a in expected.alerts)
    assert [d["reason"] for d in read_dead_letters(bus, cfg)] == ["UNDECODABLE"]
    pipe.close()
