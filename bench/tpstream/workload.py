"""Workloads of the TPStream benchmark, as columnar batches (generation is
outside the timed part, as in the paper's section 6.1).

- `car_batches`: car sensor readings, one per car per second (the paper's
  Linear Road-style trip data): speed follows a mean-reverting random walk
  with occasional sprints (hard acceleration), speeding phases and hard
  braking, so Listing 1's situations occur at realistic, low rates.
- `situation_batches`: the paper's random generator (section 6.1): boolean
  attributes, one per situation stream; situations last 10-100 s, gaps of
  10-50 s, 1 Hz.
"""

from __future__ import annotations

import numpy as np

from caesar.events.batch import EventBatch, StringPool, TypeColumns

CAR_SCHEMA = {"CarSensor": {"ts": "int", "car_id": "int", "speed": "float", "accel": "float"}}


def _batches(type_name: str, ts: np.ndarray, part: np.ndarray, cols: dict[str, np.ndarray],
             per_batch: int, pool: StringPool) -> list[EventBatch]:
    """Split time-ordered columns into batches of whole instants (~per_batch events)."""
    out = []
    n = len(ts)
    start = 0
    while start < n:
        end = min(start + per_batch, n)
        if end < n:  # extend to the end of the timestamp (whole instants per batch)
            end = int(np.searchsorted(ts, ts[end - 1], side="right"))
        sl = slice(start, end)
        out.append(EventBatch({type_name: TypeColumns(
            ts=ts[sl], seq=np.arange(start, end, dtype=np.int64), partition=part[sl],
            columns={k: v[sl] for k, v in cols.items()})}, pool))
        start = end
    return out


def car_columns(cars: int, seconds: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Readings ordered by (ts, car): speed (mph) and acceleration (m/s²).
    Cruising cars wander around 55 mph; now and then one sprints (8-10.5
    m/s² for 3-9 s, passing 70 mph on the way), keeps speeding for 4-34 s
    and brakes hard (below -9 m/s² for 2-5 s)."""
    rnd = np.random.default_rng(seed)
    speed = rnd.uniform(45, 65, cars)
    mode = np.zeros(cars, np.int8)  # 0 cruise, 1 sprint, 2 speeding, 3 braking
    left = np.zeros(cars, np.int64)
    ts = np.repeat(np.arange(seconds, dtype=np.int64), cars)
    car = np.tile(np.arange(cars, dtype=np.int64), seconds)
    sp = np.empty(cars * seconds)
    ac = np.empty(cars * seconds)
    for t in range(seconds):
        start = (mode == 0) & (rnd.random(cars) < 0.004)
        mode[start] = 1
        left[start] = rnd.integers(3, 10, start.sum())
        accel = rnd.normal(0.0, 0.8, cars) + 0.1 * (55 - speed)
        n1, n2, n3 = (mode == 1).sum(), (mode == 2).sum(), (mode == 3).sum()
        accel[mode == 1] = rnd.uniform(8.2, 10.5, n1)
        accel[mode == 2] = rnd.normal(0.0, 1.0, n2)
        accel[mode == 3] = rnd.uniform(-11.0, -9.2, n3)
        # the sensor's acceleration and the speed it integrates to, in mph per second
        speed = np.clip(speed + 0.45 * accel, 0, 140)
        speed[mode == 2] = np.maximum(speed[mode == 2] + rnd.normal(0, 1.0, n2), 71.0)
        left -= 1
        done = left <= 0
        to_speeding = done & (mode == 1)
        to_braking = done & (mode == 2)
        to_cruise = done & (mode == 3)
        mode[to_speeding] = 2
        left[to_speeding] = rnd.integers(4, 35, to_speeding.sum())
        mode[to_braking] = 3
        left[to_braking] = rnd.integers(2, 6, to_braking.sum())
        mode[to_cruise] = 0
        sp[t * cars:(t + 1) * cars] = speed
        ac[t * cars:(t + 1) * cars] = accel
    return {"ts": ts, "car_id": car, "speed": sp, "accel": ac}


def car_batches(cols: dict[str, np.ndarray], per_batch: int = 20_000,
                pool: StringPool | None = None) -> list[EventBatch]:
    pool = pool or StringPool()
    return _batches("CarSensor", cols["ts"], cols["car_id"],
                    {k: v for k, v in cols.items() if k != "ts"}, per_batch, pool)


def situation_columns(streams: int, seconds: int, partitions: int = 1, seed: int = 2,
                      scale: tuple[float, ...] = (), rates: tuple[float, ...] = ()
                      ) -> dict[str, np.ndarray]:
    """The paper's generator: per partition, attribute s{i} is 1 during
    situations of 10-100 s separated by gaps of 10-50 s. `scale[i]`
    multiplies stream i's durations (Figure 7(a)'s duration ratios);
    `rates[i]` multiplies how often its situations occur (gaps shrink)."""
    rnd = np.random.default_rng(seed)
    ts = np.repeat(np.arange(seconds, dtype=np.int64), partitions)
    part = np.tile(np.arange(partitions, dtype=np.int64), seconds)
    cols: dict[str, np.ndarray] = {"ts": ts, "p": part}
    for i in range(streams):
        vals = np.zeros((seconds, partitions), np.int64)
        for p in range(partitions):
            k = scale[i] if i < len(scale) else 1.0
            r = rates[i] if i < len(rates) else 1.0
            t = int(rnd.integers(0, 50))
            while t < seconds:
                d = max(2, int(round(rnd.integers(10, 101) * k)))
                vals[t:t + d, p] = 1
                t += d + max(1, int(round(rnd.integers(10, 51) / r)))
        cols[f"s{i}"] = vals.reshape(-1)
    return cols


def situation_batches(cols: dict[str, np.ndarray], per_batch: int = 20_000) -> list[EventBatch]:
    return _batches("E", cols["ts"], cols["p"],
                    {k: v for k, v in cols.items() if k.startswith("s")}, per_batch, StringPool())
