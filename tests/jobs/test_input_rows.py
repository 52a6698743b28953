"""Source rows -> input events (caesar.jobs.input_rows): the conversions the
wire implies, the scheduler's own check, and clear errors for a mapping that
cannot work. A property test: any valid event, written as a CSV row (all text)
or a typed row, converts back to itself, keyed as the scheduler keys it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caesar.errors import ConfigError
from caesar.examples import model_path
from caesar.jobs.input_rows import ColumnMapping, RowConverter, convert_value
from caesar.jobs.job_model import JobModel
from caesar.services.common.messages import InputRecord, partition_key
from caesar.services.scheduler.processor import SchedulerProcessor

HH = JobModel.load(model_path("hospital_hygiene"))
AD = JobModel.load(model_path("aggressive_driving"))


def converter(model: JobModel, **mapping) -> RowConverter:
    return RowConverter({t.name: t for t in model.input_types}, model.plan.partition_by,
                        ColumnMapping.parse(**mapping), model.unit_ms)


def test_csv_text_becomes_typed_fields():
    rows = converter(HH, type_column="type")
    c = rows.convert({"type": "EnterRoom", "ts": "12", "worker": " 3", "room": "7",
                      "patient": "true"})
    assert c.reason == "" and c.etype.name == "EnterRoom"
    assert c.record == {"ts": 12, "worker": 3, "room": 7, "patient": True}
    assert rows.key(c.record) == "3"


def test_ints_in_float_fields_become_floats_as_on_the_wire():
    c = converter(AD).convert({"ts": 5, "car_id": 1, "speed": 30,
                               "accel": Decimal("1.5")})
    assert c.record == {"ts": 5, "car_id": 1, "speed": 30.0, "accel": 1.5}
    assert isinstance(c.record["speed"], float)


def test_timestamps_become_event_time_in_the_models_unit():
    at = dt.datetime(2024, 1, 1, 0, 0, 1, 500_000, tzinfo=dt.UTC)
    epoch_ms = 1_704_067_201_500
    assert convert_value(at, "int", 1) == epoch_ms  # MILLISECONDS
    assert convert_value(at, "int", 1000) == epoch_ms // 1000  # SECONDS
    assert convert_value(at.replace(tzinfo=None), "int", 1) == epoch_ms  # naive = UTC
    assert convert_value(dt.date(1970, 1, 2), "int", 1000) == 86_400
    c = converter(AD).convert({"ts": at, "car_id": 1, "speed": 1.0, "accel": 0.0})
    assert c.record["ts"] == epoch_ms // 1000  # aggressive_driving counts in seconds


@pytest.mark.parametrize(("row", "reason", "says"), [
    ({"type": "Contact", "ts": "abc", "worker": 1, "room": 2, "zone": "p"}, "schema",
     "timestamp field 'ts' must be an int"),
    ({"type": "Contact", "ts": 1, "worker": None, "room": 2, "zone": "p"}, "schema",
     "partition attribute 'worker' is missing"),
    ({"type": "Contact", "ts": 1, "worker": 1, "room": 2.5, "zone": "p"}, "schema",
     "Contact.room: expected int"),
    ({"type": "Contact", "ts": 1, "worker": 2**63, "room": 2, "zone": "p"}, "schema",
     "does not fit a 64-bit int"),
    ({"type": "EnterRoom", "ts": 1, "worker": 1, "room": 2, "patient": "maybe"}, "schema",
     "EnterRoom.patient: expected bool"),
    ({"type": "Teleport", "ts": 1, "worker": 1}, "unknown_type", "'Teleport' is not an input"),
    ({"type": None, "ts": 1, "worker": 1}, "unknown_type", "None is not an input"),
])
def test_rows_that_are_no_valid_event_say_why(row, reason, says):
    c = converter(HH, type_column="type").convert(row)
    assert c.reason == reason and says in c.detail


def test_mapping_renames_columns_and_type_values():
    rows = converter(HH, type_column="kind", maps=["ts=at", "worker=badge",
                                                   "Sanitize.dispenser=unit"],
                     type_maps=["wash=Sanitize"])
    c = rows.convert({"kind": "wash", "at": 5, "badge": 9, "unit": 4})
    assert c.etype.name == "Sanitize" and c.record == {"ts": 5, "worker": 9, "dispenser": 4}


def test_the_source_is_checked_before_any_job():
    # A column called `type` names the types when nothing else does.
    rows = converter(HH).for_source(["type", "ts", "worker", "room", "patient", "zone",
                                     "dispenser"])
    assert rows.mapping.type_column == "type"
    with pytest.raises(ConfigError, match="--type-column"):
        converter(HH).for_source(["ts", "worker"])
    with pytest.raises(ConfigError, match=r"no column for .*speed"):
        converter(AD).for_source(["ts", "car_id", "accel"])
    with pytest.raises(ConfigError, match="not in the source"):
        converter(HH, type_column="kind").for_source(["ts"])
    with pytest.raises(ConfigError, match="not an input event type"):
        converter(HH, event_type="EntryViolation")
    with pytest.raises(ConfigError, match="no input event type has a field 'speed'"):
        converter(HH, maps=["speed=x"])
    with pytest.raises(ConfigError, match="FIELD=COLUMN"):
        ColumnMapping.parse(maps=["ts"])


telemetry = st.fixed_dictionaries({
    "ts": st.integers(0, 2**62), "car_id": st.integers(-(2**63), 2**63 - 1),
    "speed": st.floats(allow_nan=False, allow_infinity=False, width=64),
    "accel": st.one_of(st.none(), st.floats(-50, 50))})


@given(telemetry, st.booleans())
def test_any_valid_event_converts_back_to_itself(event, as_text):
    rows = converter(AD)
    row = {k: (None if v is None else repr(v) if isinstance(v, float) else str(v))
           for k, v in event.items()} if as_text else dict(event)
    c = rows.convert(row)
    assert c.reason == "", c.detail
    assert c.record == event
    assert rows.key(c.record) == partition_key(event, ("car_id",))
    # ... and the scheduler accepts it as it is.
    out = SchedulerProcessor(AD.plan).process(
        [InputRecord("ad-car-sensors", 0, 0, {**c.record, "type": "CarSensor"})])
    assert not out.dead_letters
