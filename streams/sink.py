"""Outputs that are never lost: `OutputSink` sends them and resends what fails until acked.

The service flushes the sink before every checkpoint, so a checkpoint never covers an input
whose outputs could still be lost: a crash never drops an output (and the run after it does not
send again what was delivered: `river_advsvm.streams.output_log`).

"""

from __future__ import annotations

import logging
import time
import typing

__all__ = ["OutputSink", "close_producer"]

log = logging.getLogger(__name__)

#: After a producer could not be made, outputs wait this long before one tries again.
UNMADE_RETRY_SECONDS = 5.0


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
        # When a producer could not be made (no broker within the bootstrap timeout), no
        # output tries again before this time (or `flush`'s next round): every output of a
        # batch would wait that long in turn, and the service not see a stop signal for minutes.
        self._unmade_until = 0.0
        self._pending: list[list] = []  # [topic, key, value, future or None]
        self.sent = 0
        # (topic, partition) -> one past the highest offset the broker acknowledged for an
        # output of this sink: where that partition ends at least, exactly as far as this
        # process wrote it (a broker's ListOffsets may answer less).
        self.acknowledged_ends: dict[tuple[str, int], int] = {}

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _ensure_producer(self):
        """The producer, made if need be; None while one could not be made."""
        from kafka.errors import KafkaError

        if self._producer is None and time.monotonic() >= self._unmade_until:
            try:
                self._producer = self._factory()
            except KafkaError as error:
                self._unmade_until = time.monotonic() + UNMADE_RETRY_SECONDS
                log.warning("cannot reach the broker to publish outputs yet (%r)", error)
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
        made = self._producer is None
        producer = self._ensure_producer()
        if producer is None:  # (tried again later, and by flush)
            entry[3] = None
            return
        if made:  # the outputs that waited for a producer go first, in their order
            for waiting in self._pending:
                if waiting is entry:
                    break
                if waiting[3] is None:
                    self._send(producer, waiting)
        self._send(producer, entry)

    def _send(self, producer, entry) -> None:
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        try:
            entry[3] = producer.send(entry[0], value=entry[2], key=entry[1])
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
                    written = future.value
                    key = (written.topic, written.partition)
                    self.acknowledged_ends[key] = max(self.acknowledged_ends.get(key, 0),
                                                      written.offset + 1)
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
            self._unmade_until = 0.0  # (one attempt to make a producer a round)
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
                close_producer(producer, timeout=1)
            except Exception:  # noqa: BLE001 - a broken producer may fail to close
                pass

    def close(self, timeout: float = 5.0) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            close_producer(producer, timeout)


def close_producer(producer, timeout: float) -> None:
    """Close a KafkaProducer within about `timeout` seconds, whatever it still holds.

    kafka-python's `close` flushes first and, when that times out, raises and leaves the
    producer open: its `__del__` then raises the same error at exit, a traceback on stderr
    after the service's last line. Here the producer is closed anyway (what it held was not
    acknowledged, so the sink still has it: a later run sends it).
    """
    from kafka.errors import KafkaTimeoutError

    try:
        producer.close(timeout=timeout)
    except KafkaTimeoutError:
        log.warning("closing the producer with outputs not acknowledged (they are sent again "
                    "by the next run)")
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()
        producer._closed = True  # (kafka-python's own flag: its __del__ closes nothing more)
