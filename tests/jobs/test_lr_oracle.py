"""The oracle follows the public LR validator's rules (SPEC.md; `V:line` =
walmartlabs/linearroad JavaValidator/ValidateMTBQEven3AeroTolls.java), each
checked on hand-made traffic with the answer worked out by hand; and the
models (model.caesar + accounts.caesar, embedded pipeline) give the same
answers on each of these scenarios."""

from __future__ import annotations

import pytest

from caesar.examples.linear_road.check_model import compile_models, diff, expected_rows, run_model
from caesar.examples.linear_road.oracle import (
    AlertRow,
    BalanceRow,
    ChargeRow,
    ExpenditureRow,
    TollRow,
    expected_outputs,
)
from caesar.examples.linear_road.records import BalanceQuery, ExpenditureQuery

from .lr_scenarios import SEG, Car, crowd, records

SPOT = 10 * SEG + 1000  # an accident spot in segment 10 (lane 1)


def lav_scenario(other_spd: int):
    """52 cars in segment 5 in minute 1 at 39 mph (every second one at `other_spd`);
    a car enters segment 5 in minute 2."""
    cars = crowd(100, 0, 5, 1, 52, 39, other_spd)
    return records(cars + [Car(1, 0).at(65, 5 * SEG + 500, 0, 10)]), {}


def test_lav_is_rounded_half_up():
    # V:464 Math.round(total / (float) n); V:565-570 toll iff cars > 50 and lav < 40.
    half = expected_outputs(lav_scenario(40)[0])
    assert TollRow(1, 65, 0, 0, 5, 40, 0) in half.tolls  # 39.5 -> 40: no toll
    below = expected_outputs(lav_scenario(39)[0])
    assert TollRow(1, 65, 0, 0, 5, 39, 2 * (52 - 50) ** 2) in below.tolls


def accident_scenario(probe_times=(170, 185, 290, 305), spd: int = 0, third: bool = False):
    """Cars 1 and 2 stand at SPOT (4th reports at 120 and 125: detected at 125,
    minute 3); car 1 drives on at 270 (cleared, minute 5). Probes enter segment 8."""
    a = Car(1, 0).at(0, 10 * SEG, 0, 10).stand(SPOT, 8, spd=spd).at(270, SPOT + 3000, 1, 40)
    b = Car(2, 0).at(5, 10 * SEG + 200, 0, 10).stand(SPOT, 12, spd=spd)
    cars = [a, b]
    if third:  # a third car stands there too, from 185 on
        cars.append(Car(3, 0).at(95, 10 * SEG + 100, 0, 10).stand(SPOT, 10, spd=spd))
    cars += [Car(10 + k, 0).at(t, 8 * SEG + 10, 0, 10) for k, t in enumerate(probe_times)]
    return records(cars), {}


def test_accident_zone_from_the_minute_after_detection_through_the_clearing_minute():
    # V:486-491: alert (and toll 0) iff td/60 + 2 <= minute <= tc/60 + 1.
    exp = expected_outputs(accident_scenario()[0])
    [acc] = exp.accidents
    assert (acc.seg, acc.detected, acc.cleared, acc.cars) == (10, 125, 270, (1, 2))
    assert {(a.vid, a.time) for a in exp.alerts if a.vid >= 10} == {(11, 185), (12, 290)}
    assert AlertRow(11, 185, 0, 0, 8, 10) in exp.alerts


def test_stopped_means_four_reports_at_one_position_at_any_speed():
    # V:534-540: xPos counts reports at the same lane and position; speed is not read.
    exp = expected_outputs(accident_scenario(spd=3)[0])
    assert [(a.detected, a.cleared) for a in exp.accidents] == [(125, 270)]


def test_a_third_stopped_car_does_not_keep_the_accident():
    # V:394: at most two cars per position; V:547: cleared when one of *its* cars moves.
    exp = expected_outputs(accident_scenario(third=True)[0])
    assert [(a.cars, a.cleared) for a in exp.accidents] == [((1, 2), 270)]


def test_one_accident_per_segment():
    # V:416: accidents are kept per segment and never removed.
    recs, _ = accident_scenario()
    later = [Car(20, 0).at(400, 10 * SEG, 0, 10).stand(10 * SEG + 3000, 5),
             Car(21, 0).at(410, 10 * SEG, 0, 10).stand(10 * SEG + 3000, 5),
             Car(22, 0).at(400, 12 * SEG, 0, 10).stand(12 * SEG + 3000, 5),
             Car(23, 0).at(410, 12 * SEG, 0, 10).stand(12 * SEG + 3000, 5)]
    exp = expected_outputs(records([], []) + recs + records(later))
    assert [(a.seg, a.detected) for a in exp.accidents] == [(10, 125), (12, 530)]


def test_a_re_entrant_car_starts_a_new_trip():
    # V:371: lane 0 more than 60 s after its last report resets the car.
    car = Car(1, 0).drive(0, 7 * SEG + 100, 1, feet=2000).leave(500)
    car.at(200, 7 * SEG + 300, 0, 10)  # back in segment 7 of the same road
    exp = expected_outputs(records([car]))
    assert [t.time for t in exp.tolls] == [0, 200]


def charge_scenario():
    """Car 1 enters segment 5 in minute 2 (toll 8), reaches segment 6 at 125 and
    leaves in it; car 2 enters at 66 and leaves into segment 6 at 96."""
    cars = crowd(100, 0, 5, 1, 52, 39)
    one = Car(1, 0).at(65, 5 * SEG + 500, 0, 10).at(95, 5 * SEG + 2500, 1, 40) \
        .at(125, 6 * SEG + 100, 1, 40).leave(300)
    two = Car(2, 0).at(66, 5 * SEG + 4000, 0, 10).at(96, 6 * SEG + 1000, 4, 10)
    queries = [BalanceQuery(95, 1, 1, 0), BalanceQuery(125, 1, 2, 0),
               BalanceQuery(126, 2, 3, 0), BalanceQuery(300, 3, 4, 0)]
    return records(cars + [one, two], queries), {}


def test_a_toll_is_charged_when_the_car_reaches_the_next_segment():
    # V:582-588 assessToll at the next new segment, any lane; V:624-644 balance.
    exp = expected_outputs(charge_scenario()[0])
    assert exp.charges == [ChargeRow(2, 96, 8), ChargeRow(1, 125, 8)]
    assert exp.balances == [BalanceRow(1, 95, 1, 0), BalanceRow(1, 125, 2, 8),
                            BalanceRow(2, 126, 3, 8), BalanceRow(3, 300, 4, 0)]


def expenditure_scenario():
    car = Car(1, 0).drive(0, 20 * SEG, 3)
    queries = [ExpenditureQuery(30, 1, 1, 0, 3), ExpenditureQuery(60, 1, 2, 1, 3),
               ExpenditureQuery(90, 1, 3, 0, 0)]
    return records([car], queries), {(1, 3, 0): 55, (1, 0, 0): 12}


def test_daily_expenditure_needs_the_day_and_expressway_and_a_day_other_than_0():
    # V:665: historical.containsKey(vid-day-xway) && day != 0.
    recs, hist = expenditure_scenario()
    assert expected_outputs(recs, hist).expenditures == [ExpenditureRow(1, 30, 1, 55)]


@pytest.fixture(scope="module")
def plans():
    return compile_models()


@pytest.mark.parametrize("scenario", [
    lambda: lav_scenario(40), lambda: lav_scenario(39), accident_scenario,
    lambda: accident_scenario(spd=3), lambda: accident_scenario(third=True),
    charge_scenario, expenditure_scenario])
def test_models_answer_like_the_oracle(plans, scenario):
    recs, hist = scenario()
    expected = expected_outputs(recs, hist)
    run = run_model(recs, hist, plans)
    assert run.dead_letters == 0
    for name, rows in expected_rows(expected).items():
        result = diff(name, rows, run.outputs[name])
        bad = {k: result[k] for k in ("missing", "extra", "duplicates", "different")}
        assert bad == dict.fromkeys(bad, 0), (name, result["examples"])
