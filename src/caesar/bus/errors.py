"""Errors of the message bus (Kafka or in-memory)."""

from __future__ import annotations

from caesar.errors import CaesarError


class BusError(CaesarError):
    """Producing, consuming or administering topics failed."""


class UnknownTopicError(BusError):
    """A topic that does not exist was asked for."""
