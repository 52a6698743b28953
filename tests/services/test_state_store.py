"""Persisted state is data, not code (issue 11): checkpoints are msgpack of
plain values per partition, written inside the runner's transaction; state
of the earlier pickle format is refused with a clear error, never loaded,
and a crafted changelog record cannot run code in a service."""

from __future__ import annotations

import os
import pickle
import zlib
from pathlib import Path

import msgpack
import pytest

from caesar.bus import InMemoryBus, OutRecord, TopicPartition, TopicSpec
from caesar.codecs import make_codec
from caesar.services.store.checkpoint import CHANGELOG, StateStore, StoreError
from caesar.services.store.state_format import (
    PICKLE_FORMAT,
    STATE_FORMAT,
    StateFormatError,
    pack,
    unpack,
)

TOPIC = "svc.changelog"


class Exploit:
    """Unpickling this runs code: it creates the file it names."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture
def bus():
    b = InMemoryBus()
    b.create_topics([TopicSpec(TOPIC, 2, config={"cleanup.policy": "compact"}),
                     TopicSpec("svc.ckpt", 1), TopicSpec("in", 2)])
    return b


def store(bus):
    return StateStore(bus, make_codec(), changelog_topic=TOPIC, checkpoints_topic="svc.ckpt",
                      service="matcher", restore_timeout_s=2)


def commit(bus, st, j, state, covers, txn="svc"):
    p = bus.producer(transactional_id=f"{txn}-{j}")
    p.begin_transaction()
    st.write(p, j, state, covers, ts=5)
    p.commit_transaction()


def raw_record(codec, key, state, fmt=STATE_FORMAT, covers=()):
    return codec.encode(CHANGELOG, {"version": 1, "store": "matcher", "state_format": fmt,
                                    "key": key, "state": state, "covers": list(covers),
                                    "ts": 0, "wall_ms": 0})


def test_state_round_trips_per_partition_and_the_newest_wins(bus):
    st = store(bus)
    tp = TopicPartition("in", 1)
    commit(bus, st, 1, {"q1": [[1, 2], [3, 4]], "n": 2**63 - 1}, {tp: 10})
    commit(bus, st, 1, {"q1": [[5, 6]], "blob": b"\x00\xff", "x": 1.5, "none": None}, {tp: 17})
    assert store(bus).load(0) is None
    state, covers = store(bus).load(1)
    assert state == {"q1": [[5, 6]], "blob": b"\x00\xff", "x": 1.5, "none": None}
    assert covers == {tp: 17}


def test_an_aborted_checkpoint_is_not_restored(bus):
    st = store(bus)
    tp = TopicPartition("in", 0)
    commit(bus, st, 0, {"v": 1}, {tp: 3})
    p = bus.producer(transactional_id="svc-0")
    p.begin_transaction()
    st.write(p, 0, {"v": 2}, {tp: 9}, ts=6)
    p.abort_transaction()
    assert store(bus).load(0) == ({"v": 1}, {tp: 3})


def test_big_state_is_chunked_below_the_message_limit(bus):
    st = store(bus)
    big = {"data": os.urandom(1_500_000)}  # incompressible: 3 chunks of <= 512 KiB
    commit(bus, st, 0, big, {})
    assert max(len(r.value or b"") for r in bus.records(TOPIC)) < 600_000
    assert store(bus).load(0)[0] == big


def test_pickle_format_state_is_refused_with_a_clear_error_and_not_run(bus, tmp_path):
    """State written by the previous format (2, pickle) is rejected, never loaded."""
    marker = tmp_path / "pwned"
    codec = make_codec()
    payload = pickle.dumps(Exploit(marker))
    bus.producer().produce([OutRecord(TOPIC, raw_record(codec, b"0", payload, PICKLE_FORMAT),
                                      b"0", partition=0)])
    with pytest.raises(StoreError, match="state format 2.*pickle.*never loaded"):
        store(bus).load(0)
    assert not marker.exists()


def test_a_crafted_changelog_record_cannot_run_code(bus, tmp_path):
    """Someone who can write the changelog topic writes a record claiming the
    current format: pickle bytes, an msgpack extension type, garbage. Each is
    a clear StoreError; nothing runs."""
    marker = tmp_path / "pwned"
    codec = make_codec()
    evil = pickle.dumps(Exploit(marker))
    candidates = [
        evil,  # pickle where msgpack is expected
        msgpack.packb({"format": STATE_FORMAT, "x": msgpack.ExtType(1, evil)}),
        b"\xc1\xc1garbage",
    ]
    for header_state in candidates:
        bus.delete_topics([TOPIC])
        bus.create_topics([TopicSpec(TOPIC, 2)])
        bus.producer().produce([OutRecord(TOPIC, raw_record(codec, b"0", header_state), b"0",
                                          partition=0)])
        with pytest.raises((StoreError, StateFormatError)):
            store(bus).load(0)
    # and a well-formed header whose chunk is a pickle: the chunk is unpacked as msgpack
    blob = zlib.compress(evil)
    header = pack({"format": STATE_FORMAT, "service": "matcher", "partition": 0, "chunks": 1,
                   "bytes": len(blob), "crc": zlib.crc32(blob)})
    bus.delete_topics([TOPIC])
    bus.create_topics([TopicSpec(TOPIC, 2)])
    bus.producer().produce([
        OutRecord(TOPIC, raw_record(codec, b"0/0", blob), b"0/0", partition=0),
        OutRecord(TOPIC, raw_record(codec, b"0", header), b"0", partition=0)])
    with pytest.raises(StoreError, match="cannot decode state"):
        store(bus).load(0)
    assert not marker.exists()


def _raw_checkpoint(bus, codec, blob, **meta):
    header = pack({"format": STATE_FORMAT, "service": "matcher", "partition": 0, "chunks": 1,
                   "bytes": len(blob), "crc": zlib.crc32(blob), **meta})
    bus.delete_topics([TOPIC])
    bus.create_topics([TopicSpec(TOPIC, 2)])
    bus.producer().produce([
        OutRecord(TOPIC, raw_record(codec, b"0/0", blob), b"0/0", partition=0),
        OutRecord(TOPIC, raw_record(codec, b"0", header), b"0", partition=0)])


def test_checkpoints_are_lz4_and_zlib_ones_still_restore(bus):
    """Checkpoints are compressed with LZ4 (the header says so); one written
    before, zlib and no word in the header, restores; an unknown compression
    or a corrupt frame is a clear StoreError."""
    codec = make_codec()
    commit(bus, store(bus), 0, {"rows": list(range(1000))}, {})
    header = next(r for r in reversed(bus.records(TOPIC)) if r.key == b"0")
    meta = unpack(codec.decode_as(CHANGELOG, header.value)["state"])
    assert meta["compression"] == "lz4"
    assert store(bus).load(0)[0] == {"rows": list(range(1000))}

    _raw_checkpoint(bus, codec, zlib.compress(pack({"older": [1, 2]}), 1))
    assert store(bus).load(0)[0] == {"older": [1, 2]}
    _raw_checkpoint(bus, codec, b"abc", compression="brotli")
    with pytest.raises(StoreError, match="compressed with 'brotli'"):
        store(bus).load(0)
    _raw_checkpoint(bus, codec, b"not an lz4 frame", compression="lz4")
    with pytest.raises(StoreError, match="does not decompress"):
        store(bus).load(0)


def test_the_format_holds_plain_data_only():
    assert unpack(pack({"a": (1, 2), "s": {3, 1}})) == {"a": [1, 2], "s": [1, 3]}
    with pytest.raises(StateFormatError, match="holds a Exploit"):
        pack({"x": Exploit(Path("/nonexistent"))})
    with pytest.raises(StateFormatError, match="extension type 7"):
        unpack(msgpack.packb(msgpack.ExtType(7, b"zz")))
    with pytest.raises(StateFormatError, match="holds a int"):
        pack({"n": 2**64})  # beyond msgpack's 64 bits


def test_restore_reads_the_tail_not_the_whole_changelog(bus, monkeypatch):
    """Issue 11: the changelog was read from the start on every restart. Now
    a restore reads a window at the end of partition j's log, so what it
    reads does not grow with uptime (the number of checkpoints written)."""
    import caesar.services.store.checkpoint as checkpoint

    read = []
    original = checkpoint.read_to_end

    def counting(*args, **kwargs):
        for batch in original(*args, **kwargs):
            read.append(len(batch))
            yield batch

    monkeypatch.setattr(checkpoint, "read_to_end", counting)
    tp = TopicPartition("in", 0)
    st = store(bus)
    sizes, written = {}, 0
    for n in (500, 2500):  # checkpoints written in all
        for i in range(written, n):
            commit(bus, st, 0, {"i": i}, {tp: i})
        written = n
        read.clear()
        restoring = store(bus)
        assert restoring.load(0) == ({"i": n - 1}, {tp: n - 1})
        sizes[n] = sum(read)
        assert restoring.read_records == sizes[n] and restoring.read_bytes > 0  # (stats)
    assert sizes[2500] == sizes[500] <= 4, sizes  # about one checkpoint


def test_state_topics_are_compacted_and_rolled():
    from caesar.bus.topics import topic_specs
    from caesar.settings import TopicSettings

    topics = TopicSettings()
    specs = {s.name: s.config for s in topic_specs(topics, ["Pos"], ["matcher", "router"])}
    for name in (topics.checkpoints, topics.changelog_topic("matcher"),
                 topics.changelog_topic("router")):
        assert specs[name]["cleanup.policy"] == "compact", name
        assert int(specs[name]["segment.ms"]) <= 60_000, name  # rolled, so cleanable
    assert specs[topics.context_changes]["cleanup.policy"] == "compact"
