"""Errors of the message bus (Kafka or in-memory)."""

from __future__ import annotations

from caesar.errors import CaesarError


class BusError(CaesarError):
    """Producing, consuming or administering topics failed."""


class UnknownTopicError(BusError):
    """A topic that does not exist was asked for."""


class TransactionAbortedError(BusError):
    """The open transaction cannot commit; it was (or must be) aborted. The
    producer stays usable: rewind to the last committed state and go on."""


class ProducerFencedError(BusError):
    """A newer producer with the same transactional id took over (or the
    producer hit a fatal error): this producer can do nothing more."""


class ProducerStuckError(ProducerFencedError):
    """A transactional call did not return in time (librdkafka can block past
    its own timeout when the coordinator went away): the producer is given
    up and replaced; the new instance's init_transactions fences it."""
