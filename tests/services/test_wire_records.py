"""Messages survive the Avro records of the internal topics unchanged."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.codecs import make_codec
from caesar.events.batch import StringPool
from caesar.services.common.columnar import (
    batch_from,
    batch_record,
    chunks,
    pack_ints,
    routed_chunks,
    routed_from,
    routed_record,
    transactions_in,
    unpack_ints,
)
from caesar.services.common.messages import (
    Alert,
    ContextChange,
    Discard,
    Progress,
    RoutedBatch,
    RoutedTransaction,
    Transaction,
    TxnBatch,
)
from caesar.services.common.wire import (
    CHANGE,
    DERIVED,
    PROGRESS,
    ROUTED_BATCH,
    TXN_BATCH,
    alert_from,
    alert_record,
    change_from,
    change_record,
    progress_from,
    progress_record,
)

CODEC = make_codec()
SCHEMAS = {"Pos": {"ts": "int", "spd": "float", "lane": "string", "ok": "bool", "n": "int"},
           "Stop": {"ts": "int", "vid": "int"}}


def trip(schema, record):
    name, value = CODEC.decode(CODEC.encode(schema, record))
    assert name == schema
    return value


def txns():
    return [Transaction(42, "0|1", 7, ({"type": "Pos", "ts": 7, "spd": 1.5, "lane": None,
                                        "ok": True, "n": -(2**63), "_ingest_ms": 99},
                                       {"type": "Stop", "ts": 7, "vid": 3})),
            Transaction(43, "0|2", 7, ({"type": "Pos", "ts": 7, "spd": -0.5, "lane": "L",
                                        "ok": False, "n": 2**63 - 1, "_ingest_ms": 98},)),
            Transaction(42, "0|1", 9, ({"type": "Stop", "ts": 9, "vid": 4},))]


def test_round_trips():
    batch = TxnBatch.of(txns(), SCHEMAS)
    back, seq = batch_from(trip(TXN_BATCH, batch_record(batch, 3)), StringPool())
    assert seq == 3
    assert back.transactions() == batch.transactions()
    assert back.keys == batch.keys
    assert back.events.by_type["Pos"].ingest.tolist() == [99, 98]
    assert transactions_in(batch_record(batch, 3)) == [("0|1", 7), ("0|2", 7), ("0|1", 9)]
    assert progress_from(trip(PROGRESS, progress_record(Progress(10, "deriver"), "a", 0))) == \
        Progress(10, "deriver")
    change = ContextChange(42, "0|1", 7, 0b110, ("a", "b"))
    assert change_from(trip(CHANGE, change_record(change, 5, 0b1))) == (change, 5)
    alert = Alert("q1", "Toll", 42, "0|1", 3, 7, {"vid": 1, "lav": 2.5}, "tolls", ingest_ms=5)
    back_alert = alert_from(trip(DERIVED, alert_record(alert)))
    assert back_alert.identity() == alert.identity() and back_alert.ingest_ms == 5


def test_routed_batches_round_trip_with_discard_only_partitions():
    a, b, c = txns()
    items = [RoutedTransaction(a, ("p", "q"), ("r",), ("m",)), RoutedTransaction(b, ("p",)),
             Discard(44, 8, ("q",)), RoutedTransaction(c, ("p", "q"))]
    routed = RoutedBatch.of(items, SCHEMAS)
    back, seq = routed_from(trip(ROUTED_BATCH, routed_record(routed, 5)), StringPool())
    assert seq == 5
    assert back.items() == routed.items()
    assert [d for d in back.items() if isinstance(d, Discard)] == [Discard(44, 8, ("q",))]


def test_chunks_cut_between_transactions():
    many = [Transaction(p, f"k{p}", ts, tuple({"type": "Stop", "ts": ts, "vid": v}
                                             for v in range(3)))
            for ts in range(5) for p in range(4)]
    batch = TxnBatch.of(many, SCHEMAS)
    pieces = list(chunks(batch, max_rows=7))
    assert all(len(p) <= 7 for p in pieces) and len(pieces) == 10
    assert [t for p in pieces for t in p.transactions()] == batch.transactions()
    routed = RoutedBatch.of([RoutedTransaction(t, ("p",)) for t in many] + [Discard(9, 2, ("p",))],
                            SCHEMAS)
    parts = list(routed_chunks(routed, max_rows=7))
    assert sorted((i.txn.ts, i.txn.partition) for p in parts for i in p.items()
                  if isinstance(i, RoutedTransaction)) == sorted((t.ts, t.partition) for t in many)
    assert [len(p.discards) for p in parts][:2] == [1, 0]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
@settings(max_examples=200)
def test_int_columns_are_exact_over_int64(values):
    arr = np.array(values, dtype=np.int64)
    packed = pack_ints(arr)
    assert unpack_ints(trip_int(packed)).tolist() == values
    if values:
        span = max(values) - min(values)
        assert packed["width"] == next(w for w in (1, 2, 4, 8) if span < 1 << (8 * w))


def trip_int(col):
    return trip("caesar.IntColumn", col)
