"""What a service process needs around its loop: its checkpoint directory to itself, BLAS on
one thread, a first broker within a deadline (that accepts the connection settings), and
SIGTERM / SIGINT handled as documented in `river_advsvm.streams.service`."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import signal
import threading
import time

from kafka.errors import KafkaError, KafkaTimeoutError

from river_advsvm.streams.connection_check import ConnectionCheckError, check_connection, explain
from river_advsvm.streams.security import SecurityError

__all__ = ["CHECK_TIMEOUT", "ENVIRONMENT_FAULT", "INTERRUPTED", "BrokerUnreachable", "Signals",
           "SettingsRefused", "blas_threads", "exit_status", "lock_directory", "reach_broker"]

log = logging.getLogger(__name__)

#: The exit status after a SIGINT (128 + the signal's number, as shells report it).
INTERRUPTED = 128 + signal.SIGINT
#: Exit statuses of `advsvm serve` for what stopped it (docs/deployment.md tabulates them, and
#: its systemd unit restarts 1, 3 and 5 and not 2 and 4).
UNEXPECTED, USAGE_ERROR, NO_BROKER, SETTINGS_REFUSED, ENVIRONMENT_FAULT = 1, 2, 3, 4, 5
#: Errors of the machine rather than of the command line: a restart may find them gone
#: (space freed, a disk remounted, memory or descriptors released, a file size limit raised:
#: EFBIG is a container's or systemd's RLIMIT_FSIZE, or a file system's largest file).
RETRIABLE_ERRNOS = frozenset([errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM,
                              errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.EAGAIN,
                              errno.EBUSY, errno.ETIMEDOUT, errno.ESTALE, errno.ENOLCK,
                              errno.EFBIG])


#: One connection check at start-up takes at most this long (then it is tried again, until
#: `connect_timeout`): a SIGTERM while the broker is away is answered within seconds.
CHECK_TIMEOUT = 5.0


class BrokerUnreachable(RuntimeError):
    """No broker answered within `connect_timeout` seconds at start-up."""


class SettingsRefused(RuntimeError):
    """At start-up the cluster answered, and refused the connection settings (a CA that did not
    sign its certificate, plaintext against TLS or TLS against plaintext, a client certificate
    missing or refused, a wrong SASL password or mechanism): retrying cannot help."""


def exit_status(error: BaseException) -> int:
    """The exit status for an error that stopped the service: whether a restart can help."""
    from river_advsvm.checkpoint import CheckpointError
    from river_advsvm.streams.broker import BrokerError

    if isinstance(error, BrokerUnreachable):
        return NO_BROKER
    if isinstance(error, SettingsRefused):
        return SETTINGS_REFUSED
    if isinstance(error, MemoryError) or (isinstance(error, OSError)
                                          and error.errno in RETRIABLE_ERRNOS):
        return ENVIRONMENT_FAULT
    if isinstance(error, (ValueError, TypeError, OSError, CheckpointError, BrokerError)):
        return USAGE_ERROR
    return UNEXPECTED


def lock_directory(directory: str) -> int:
    """An exclusive lock on `directory` itself (an open descriptor to `os.close`), or
    `ValueError` if another service holds it: two services writing one checkpoint would
    overwrite each other.

    The lock is an `flock` on the directory, opened O_RDONLY | O_DIRECTORY: unlike a lock file,
    nothing in it can be deleted to defeat the lock, and a path through a symlink locks the
    directory it resolves to. The kernel drops the lock when the process dies.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:
        raise ValueError(f"the checkpoint directory {directory} is not a directory") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ValueError(f"another service is using the checkpoint directory {directory}") \
            from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def reach_broker(clients, topics: list[str], timeout: float, stopping: threading.Event,
                 heartbeat=lambda: None) -> bool:
    """Wait for a first broker, at most `timeout` seconds, check that it accepts the connection
    settings (`river_advsvm.streams.connection_check`), and create `topics` (one partition each) on
    it.

    Returns False if `stopping` came first; raises `SettingsRefused` as soon as the cluster
    refuses the settings, and `BrokerUnreachable` after the timeout (with the last reason).
    `heartbeat` is called while waiting (liveness: waiting for the broker is not being stuck).
    """
    deadline = time.monotonic() + timeout
    servers = clients.bootstrap_servers
    waiting, reason = False, ""
    while not stopping.is_set():
        heartbeat()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerUnreachable(f"no Kafka broker answered at {servers} within {timeout:g}s"
                                    f"{f' ({reason})' if waiting else ''}")
        try:
            check_connection(servers, clients.security, min(remaining, CHECK_TIMEOUT))
            clients.create_topics({t: 1 for t in topics},
                                  bootstrap_timeout_ms=int(1000 * max(0.1, min(5.0, remaining))))
            return True
        except ConnectionCheckError as error:
            if not error.retriable:
                raise SettingsRefused(str(error)) from None
            reason = str(error)
        except KafkaError as error:
            if not isinstance(error, KafkaTimeoutError):  # a broker answered, and refused:
                log.warning("could not create the output topics: %r", error)  # auto-created?
                return True
            reason = explain(error, servers, clients.security)
        except SecurityError:  # a file of the settings became unreadable
            raise
        except ValueError as error:  # the servers do not parse
            raise ValueError(f"bootstrap servers {servers!r}: {error}") from None
        if not waiting:
            log.warning("waiting for a Kafka broker at %s (at most %gs): %s", servers, timeout,
                        reason)
            waiting = True
        stopping.wait(min(0.5, max(0.0, deadline - time.monotonic())))
    return False


class Signals:
    """SIGTERM, SIGHUP (the terminal closed) and SIGINT call `stop` (the loop drains); a second
    SIGINT raises KeyboardInterrupt at once. Installed from the main thread only; `restore`
    puts the previous handlers back."""

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

        def terminate(number, _):
            log.info("terminated (%s): draining, then a final checkpoint",
                     signal.Signals(number).name)
            stop()

        self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, terminate)
        # A hang-up killed the service with no drain and no checkpoint, and with a status
        # systemd's Restart=on-failure takes for a clean exit.
        self._previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, terminate)
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
                    "(river-advsvm's kafka extra installs it)")
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield
