"""What a service process needs around its loop: its checkpoint directory to itself, BLAS on
one thread, a first broker within a deadline, and SIGTERM / SIGINT handled as documented in
`streams.service`."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import threading
import time

from kafka.errors import KafkaError, KafkaTimeoutError

__all__ = ["INTERRUPTED", "BrokerUnreachable", "Signals", "blas_threads", "lock_directory",
           "reach_broker"]

log = logging.getLogger(__name__)

#: The exit status after a SIGINT (128 + the signal's number, as shells report it).
INTERRUPTED = 128 + signal.SIGINT


class BrokerUnreachable(RuntimeError):
    """No broker answered within `connect_timeout` seconds at start-up."""


def lock_directory(directory: str):
    """An exclusive lock on `directory` (an open file to close), or `ValueError` if another
    service holds it: two services writing one checkpoint would overwrite each other."""
    lock = open(os.path.join(directory, ".lock"), "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ValueError(f"another service is using the checkpoint directory {directory}") \
            from None
    return lock


def reach_broker(clients, topics: list[str], timeout: float, stopping: threading.Event) -> bool:
    """Wait for a first broker, at most `timeout` seconds, and create `topics` (one partition
    each) on it; False if `stopping` came first, `BrokerUnreachable` after the timeout."""
    deadline = time.monotonic() + timeout
    waiting = False
    while not stopping.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerUnreachable(f"no Kafka broker answered at {clients.bootstrap_servers} "
                                    f"within {timeout:g}s")
        try:
            clients.create_topics({t: 1 for t in topics},
                                  bootstrap_timeout_ms=int(1000 * max(0.1, min(5.0, remaining))))
            return True
        except KafkaError as error:
            if not isinstance(error, KafkaTimeoutError):  # a broker answered, and refused:
                log.warning("could not create the output topics: %r", error)  # auto-created?
                return True
            if not waiting:
                log.warning("waiting for a Kafka broker at %s (at most %gs)",
                            clients.bootstrap_servers, timeout)
                waiting = True
            stopping.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        except ValueError as error:  # kafka-python could not parse the servers
            raise ValueError(f"bootstrap servers {clients.bootstrap_servers!r}: {error}") \
                from None
    return False


class Signals:
    """SIGTERM and SIGINT call `stop` (the loop drains); a second SIGINT raises
    KeyboardInterrupt at once. Installed from the main thread only; `restore` puts the
    previous handlers back."""

    def __init__(self, stop):
        self.interrupted = False
        self._previous = {}
        if threading.current_thread() is not threading.main_thread():
            return

        def interrupt(*_):
            log.warning("interrupted: draining, then a final checkpoint (interrupt again to "
                        "stop at once)")
            self.interrupted = True
            signal.signal(signal.SIGINT, signal.default_int_handler)  # the second one stops
            stop()

        self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, lambda *_: stop())
        self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)

    def status(self, status: int) -> int:
        """The exit status: `status`, or `INTERRUPTED` for a clean stop after SIGINT."""
        return INTERRUPTED if status == 0 and self.interrupted else status

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}


@contextlib.contextmanager
def blas_threads(threads: int | None):
    """Limit BLAS to `threads` threads for the duration (nothing if None or 0).

    threadpoolctl acts on the BLAS library numpy already loaded (the command line imports numpy
    before any service code runs, too late for OMP_NUM_THREADS and friends), covers OpenBLAS,
    MKL and BLIS alike, and restores the previous limits afterwards, so a program that embeds
    the service keeps its own BLAS settings outside it.
    """
    if not threads:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.warning("threadpoolctl is missing: BLAS keeps its default threads "
                    "(pip install 'river-advsvm[kafka]')")
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield
