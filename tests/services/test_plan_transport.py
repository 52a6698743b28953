"""Plans travel to running actors as JSON (the plans topic, `stage_plan`).
A plan read back must be the plan that was written, field order included:
an event type's fields make its generated Avro input schema, and format 1
sorted them by name, so a scheduler switched to a staged plan before it had
decoded a record dead-lettered every input as "no schema with fingerprint"
(the flaky upgrade-under-flowing-input test)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.bus.records import Record
from caesar.codecs import make_codec
from caesar.errors import PlanError
from caesar.language import compile_model
from caesar.plans.serialize import plan_from_json, plan_json, plan_version, to_data
from caesar.services.common.config import ServiceConfig
from caesar.services.common.plans import PlanBook
from caesar.services.common.wire import register_input_schemas
from caesar.services.scheduler.runner import SchedulerHandler
from caesar.settings import Settings, TopicSettings

FIELDS = ["vid", "seg", "spd", "lane", "pos", "xway", "dir"]
REQUIRED = ("vid", "seg", "spd")  # what the model reads


def _model(fields: list[str], extra: str = "") -> str:
    decl = ", ".join(f"{f} INT" for f in fields)
    return (f'MODEL order\nPARTITION BY seg\nEVENT Pos(ts INT, {decl}{extra}) FROM TOPIC "pos"\n'
            "DERIVE Fast(p.vid, p.spd) PATTERN Pos p WHERE p.spd > 90\n")


def _fingerprints(plan) -> dict[str, int]:
    codec = make_codec(Settings())
    names = register_input_schemas(codec.repository, plan)
    return {t: codec.repository.get(n).fingerprint for t, n in names.items()}


@settings(max_examples=60, deadline=None)
@given(st.permutations(FIELDS), st.integers(0, len(FIELDS) - len(REQUIRED)))
def test_a_plan_read_back_keeps_its_field_order_schemas_and_version(order, dropped):
    optional = [f for f in order if f not in REQUIRED]
    plan = compile_model(_model([f for f in order if f in REQUIRED or f in optional[dropped:]]))
    back = plan_from_json(plan_json(plan))
    for a, b in zip(plan.event_types, back.event_types, strict=True):
        assert list(a.fields) == list(b.fields)
    assert plan_version(back) == plan_version(plan)
    assert _fingerprints(back) == _fingerprints(plan)


def test_format_1_plans_on_the_topic_still_read():
    plan = compile_model(_model(["vid", "seg", "spd"]))
    old = json.dumps({"format": 1, "plan": to_data(plan)}, sort_keys=True)
    assert plan_version(plan_from_json(old)) == plan_version(plan)


@pytest.mark.parametrize("bad", [{"$p": {"a": 1}}, {"$p": [["a"]]}, {"$p": [[1, 2]]}])
def test_a_malformed_ordered_map_is_a_plan_error(bad):
    with pytest.raises(PlanError, match="pairs"):
        plan_from_json(json.dumps({"format": 2, "plan": bad}))


@pytest.mark.parametrize("v2_extra", ["", ", lane INT"])
def test_a_switched_scheduler_decodes_records_of_every_plan_version(v2_extra):
    """The driver stages v2 as JSON and the switch comes before the scheduler
    decoded anything; producers still write with v1's schema."""
    v1 = compile_model(_model(["vid", "spd", "seg"]))
    v2 = compile_model(_model(["vid", "spd", "seg"], v2_extra).replace("p.spd > 90", "p.spd > 80"))
    writer = make_codec(Settings())
    value = writer.encode(register_input_schemas(writer.repository, v1)["Pos"],
                          {"ts": 5, "vid": 1, "spd": 2, "seg": 3})
    cfg = ServiceConfig(v1, TopicSettings.under("t", partitions=2), make_codec(Settings()),
                        (0, 1), "t", plan_book=PlanBook(v1))
    handler = SchedulerHandler(cfg)
    assert cfg.plan_book is not None
    version = cfg.plan_book.add(plan_from_json(plan_json(v2)))  # as stage_plan does
    cfg.plan_book.requested = version
    assert set(handler.control()) == {0, 1}
    assert handler.plan_versions() == {0: version, 1: version}
    got = handler.decode(Record("pos", 0, 0, b"3", value, 0, ()))
    assert got.error is None
    assert got.value is not None and {k: got.value[k] for k in ("type", "vid", "spd", "seg")} \
        == {"type": "Pos", "vid": 1, "spd": 2, "seg": 3}

