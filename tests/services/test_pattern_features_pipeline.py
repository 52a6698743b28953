"""The issue-16 features through the embedded pipeline (scheduler, deriver,
router, matcher, as services run them): ON TIMEOUT events on their own
topic, OUTPUT LAST EVERY, count and session windows, exact 64-bit ids."""

from __future__ import annotations

import caesar

BIG = 2**62 + 1

MODEL = """
MODEL shop
PARTITION BY shop
EVENT Order(shop INT, id LONG, amount DOUBLE, ts LONG) FROM TOPIC "orders";
EVENT Payment(shop INT, id LONG, ts LONG) FROM TOPIC "payments";
DERIVE Paid(o.id AS id, count(p) AS payments)
  PATTERN SEQ(Order o, Payment{1,3} GREEDY p)
  WHERE [id]
  WITHIN 10
  STRATEGY skip_till_next_match
  AFTER MATCH SKIP PAST LAST EVENT
  ON TIMEOUT DERIVE Unpaid(o.id AS id)
  OUTPUT LAST EVERY 100;
DERIVE Recent(count(*) AS n, sum(amount) AS total) FROM Order WINDOW COUNT 2;
DERIVE Visits(count(*) AS n) FROM Order WINDOW SESSION GAP 5 GROUP BY id;
"""


def alerts(events):
    session = caesar.compile(MODEL).session()
    out = session.push(events).alerts + session.finish().alerts
    return sorted((a.topic, a.event_type, tuple(sorted(a.fields.items())), a.start_ts, a.end_ts)
                  for a in out)


def test_timeouts_rate_limit_and_windows():
    events = [
        {"type": "Order", "shop": 1, "id": BIG, "amount": 1.5, "ts": 1},
        {"type": "Payment", "shop": 1, "id": BIG - 1, "ts": 2},   # another id: ignored
        {"type": "Payment", "shop": 1, "id": BIG, "ts": 3},
        {"type": "Payment", "shop": 1, "id": BIG, "ts": 4},
        {"type": "Order", "shop": 1, "id": 7, "amount": 2.0, "ts": 20},
        {"type": "Payment", "shop": 1, "id": 7, "ts": 22},
    ]
    got = alerts(events)
    # skip past last event: the first run matches once per payment it takes,
    # the first of them prunes the rest; OUTPUT LAST keeps the interval's last
    paid = [g for g in got if g[1] == "Paid"]
    assert paid == [("shop.Paid", "Paid", (("id", 7), ("payments", 1)), 20, 22)]
    unpaid = [g for g in got if g[1] == "Unpaid"]
    assert unpaid == []  # every order was paid within 10
    recent = [g for g in got if g[1] == "Recent"]
    assert [dict(g[2])["n"] for g in recent] == [2]
    visits = sorted(dict(g[2])["id"] for g in got if g[1] == "Visits")
    assert visits == [7, BIG]


def test_timeout_goes_to_its_own_topic():
    events = [{"type": "Order", "shop": 1, "id": BIG, "amount": 1.0, "ts": 1},
              {"type": "Order", "shop": 1, "id": 5, "amount": 1.0, "ts": 30}]
    unpaid = [g for g in alerts(events) if g[1] == "Unpaid"]
    assert unpaid == [("shop.Unpaid", "Unpaid", (("id", 5),), 30, 40),
                      ("shop.Unpaid", "Unpaid", (("id", BIG),), 1, 11)]
