"""Messages survive the Avro records of the internal topics unchanged."""

from caesar.codecs import make_codec
from caesar.services.common.messages import (
    Alert,
    ContextChange,
    Discard,
    Progress,
    RoutedTransaction,
    Transaction,
)
from caesar.services.common.wire import (
    CHANGE,
    DERIVED,
    PROGRESS,
    ROUTED,
    TXN,
    alert_from,
    alert_record,
    change_from,
    change_record,
    progress_from,
    progress_record,
    routed_from,
    routed_record,
    txn_from,
    txn_record,
)

CODEC = make_codec()


def trip(schema, record):
    name, value = CODEC.decode(CODEC.encode(schema, record))
    assert name == schema
    return value


def test_round_trips():
    txn = Transaction(42, "0|1", 7, ({"type": "Pos", "ts": 7, "spd": 1.5, "lane": None,
                                      "ok": True, "_ingest_ms": 99},))
    back, seq = txn_from(trip(TXN, txn_record(txn, 3)))
    assert (back, seq) == (txn, 3)
    assert progress_from(trip(PROGRESS, progress_record(Progress(10, "deriver"), "a", 0))) == \
        Progress(10, "deriver")
    change = ContextChange(42, "0|1", 7, 0b110, ("a", "b"))
    assert change_from(trip(CHANGE, change_record(change, 5, 0b1))) == (change, 5)
    routed = RoutedTransaction(txn, ("p",), ("q",), ("m",))
    assert routed_from(trip(ROUTED, routed_record(routed, 3))) == (routed, 3)
    assert routed_from(trip(ROUTED, routed_record(Discard(42, 7, ("q",)), 4))) == \
        (Discard(42, 7, ("q",)), 4)
    alert = Alert("q1", "Toll", 42, "0|1", 3, 7, {"vid": 1, "lav": 2.5}, "tolls", ingest_ms=5)
    back = alert_from(trip(DERIVED, alert_record(alert)))
    assert back.identity() == alert.identity() and back.ingest_ms == 5
