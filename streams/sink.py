"""Outputs that are never lost: `OutputSink` sends them and resends what fails until acked.

The service flushes the sink before every checkpoint, so a checkpoint never covers an input
whose outputs could still be lost: a crash never drops an output (and the run after it does not
send again what was delivered: `river_advsvm.streams.output_log`).

"""

from __future__ import annotations

import logging
import time
import typing

__all__ = ["OutputSink"]

log = logging.getLogger(__name__)


class OutputSink:
    """Sends outputs and makes sure each one is acknowledged, resending what fails.

    `flush` returns only when every output sent so far is acknowledged (acks=all), retrying
    through broker outages with exponential backoff. The service flushes before every
    checkpoint, so a checkpoint never covers an input whose outputs could still be lost: a
    crash never drops an output.

    Parameters
    ----------
    producer_factory
        Makes a producer; called again when the producer has to be replaced.

    """

    def __init__(self, producer_factory: typing.Callable[[], typing.Any]):
        self._factory = producer_factory
        self._producer = None
        self._pending: list[list] = []  # [topic, key, value, future or None]
        self.sent = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _ensure_producer(self):
        if self._producer is None:
            self._producer = self._factory()
        return self._producer

    def send(self, topic: str, value: bytes | None, key: bytes | None = None) -> list:
        """Queue an output (a value of None deletes `key` from a compacted topic); returns its
        entry (for `offset_of` and `cancel`)."""
        entry = [topic, key, value, None]
        self._pending.append(entry)
        self._submit(entry)
        return entry

    @staticmethod
    def offset_of(entry: list) -> int | None:
        """The offset the broker gave an entry once acknowledged (None if not, or dropped)."""
        future = entry[3]
        if future is None or not future.is_done or future.exception is not None:
            return None
        return future.value.offset

    def cancel(self, entry: list) -> None:
        """Stop resending an entry not yet acknowledged (one already in flight may still land)."""
        if self.offset_of(entry) is None:
            self._pending = [e for e in self._pending if e is not entry]

    def _submit(self, entry) -> None:
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        try:
            entry[3] = self._ensure_producer().send(entry[0], value=entry[2], key=entry[1])
        except MessageSizeTooLargeError as error:  # retrying cannot help: drop it, loudly
            log.error("dropping an output to %s too large to send: %r", entry[0], error)
            self._pending = [e for e in self._pending if e is not entry]
        except KafkaError as error:  # no metadata yet (broker down): retried by flush
            log.debug("could not send to %s yet: %r", entry[0], error)
            entry[3] = None

    def flush(self, timeout: float | None = None, should_stop=lambda: False) -> bool:
        """Wait until every output is acknowledged; False if `timeout` or `should_stop` came
        first (the outputs then stay pending, to be flushed later)."""
        from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError

        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = 0.1
        while self._pending:
            try:
                if self._producer is not None:
                    wait = 5.0 if deadline is None else max(0.0, deadline - time.monotonic())
                    self._producer.flush(timeout=min(wait, 5.0))
            except KafkaTimeoutError:
                pass
            still = []
            fatal = False
            failed: dict = {}  # topic -> [outputs failed this round, the first error]
            for entry in self._pending:
                future = entry[3]
                if future is not None and future.is_done and future.exception is None:
                    self.sent += 1
                    continue
                if future is not None and future.is_done:
                    error = future.exception
                    if isinstance(error, MessageSizeTooLargeError):
                        log.error("dropping an output too large for the broker: %r", error)
                        continue
                    failed.setdefault(entry[0], [0, error])[0] += 1
                    fatal = fatal or not getattr(error, "retriable", False)
                    entry[3] = None
                still.append(entry)
            # One line per topic and round, not one per output: a broker refusing them all
            # would otherwise log every pending output at every resend.
            for topic, (count, error) in failed.items():
                log.warning("%d output%s to %s failed (%r); resending", count,
                            "s" if count > 1 else "", topic, error)
            self._pending = still
            if not self._pending:
                break
            if fatal:
                self._replace_producer()
            for entry in list(self._pending):
                if entry[3] is None:
                    self._submit(entry)
            if should_stop() or (deadline is not None and time.monotonic() >= deadline):
                return False
            if any(entry[3] is None for entry in self._pending):
                log.warning("outputs waiting for the broker; retrying in %.1fs", backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        return True

    def _replace_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=1)
            except Exception:  # noqa: BLE001 - a broken producer may fail to close
                pass

    def close(self, timeout: float = 5.0) -> None:
        if self._producer is not None:
            self._producer.close(timeout=timeout)
            self._producer = None
