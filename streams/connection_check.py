"""Does the cluster accept these security settings? One attempt, and one line saying why not.

A Kafka client that cannot connect retries quietly until its timeout and then says only that
it could not bootstrap: a wrong CA, a wrong password and a TLS client talking to a plaintext
port all look the same. `check_connection` connects once, step by step, and names the step
that failed:

1. TCP to each bootstrap address (refused, unresolvable, no answer);
2. the TLS handshake, with the context the clients will use (the broker's certificate against
   the CA file and the host name, the client certificate for mutual TLS); a handshake that
   fails is retried as plaintext Kafka to tell "this port is not TLS" from other failures;
3. a Kafka `ApiVersions` request (a plaintext client on a TLS port fails here, and a TLS
   probe of the same port then tells it so);
4. for SASL, the `SaslHandshake` for the mechanism (is it offered?);
   without SASL settings, whether the listener requires SASL;
5. the brokers the cluster advertises (a Metadata request; with SASL, a kafka-python admin
   client authenticates first, as the service's clients will), each probed as in 1-3: a TLS
   terminator, or a listener that advertises another address, makes clients that bootstrap
   and then hang. A broker that is only down is no misconfiguration: it fails the check only
   if no advertised broker answers, and it is a wrong setting when the cluster has one broker
   (the bootstrap address reached it, so its advertised address is wrong, not down).

Steps 1-4 are plain sockets, so they report the exact `ssl` error; SASL authentication itself
is kafka-python's. A `ConnectionCheckError` says whether waiting could help (`retriable`: the
broker is down or unreachable) or the settings are wrong (a service should exit with the
message).

`explain` turns any exception from kafka-python or `ssl` (its chain included) into the same
kind of line, for errors that come later.

Examples
--------

>>> import ssl
>>> from river_advsvm.streams.connection_check import explain
>>> error = ssl.SSLCertVerificationError(1, "certificate verify failed")
>>> error.verify_code, error.verify_message = 10, "certificate has expired"
>>> explain(error, "broker.example.com:9093")
'the certificate of broker.example.com:9093 has expired'

"""

from __future__ import annotations

import socket
import ssl
import struct
import time

from river_advsvm.streams.security import MECHANISMS, SecuritySettings

__all__ = ["ConnectionCheckError", "check_connection", "explain", "parse_bootstrap"]

_METADATA, _API_VERSIONS, _SASL_HANDSHAKE = 3, 18, 17
_UNSUPPORTED_SASL_MECHANISM, _ILLEGAL_SASL_STATE = 33, 34
_CLIENT_ID = b"advsvm-check"


class ConnectionCheckError(RuntimeError):
    """The cluster cannot be used with these settings; `str()` is one line for the user.

    `retriable` is True when the cause may go away by itself (the broker is down, a network
    timeout), False when the settings are wrong (certificate, password, protocol).
    """

    def __init__(self, message: str, retriable: bool):
        super().__init__(message)
        self.retriable = retriable


def parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT]` (IPv6 as `[::1]:9092`) as (host, port) pairs; ValueError if
    malformed. A listener's prefix (`PLAINTEXT://`) is dropped, as the Kafka clients do."""
    addresses = []
    for item in bootstrap_servers.split(","):
        item = item.strip()
        item = item[item.rfind("://") + 3:] if "://" in item else item
        host, sep, port = item.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]")
        host = host[1:-1] if bracketed else host
        if (not sep or not host or "[" in host or "]" in host  # ("[::1:9092": a typo)
                or not (port.isascii() and port.isdigit())
                or not 0 < int(port) < 65536):
            raise ValueError(f"bootstrap address {item!r} is not HOST:PORT")
        addresses.append((host, int(port)))
    return addresses


def check_connection(bootstrap_servers: str, settings: SecuritySettings,
                     timeout: float = 10.0) -> None:
    """Connect once to the cluster with `settings`; `ConnectionCheckError` if that fails.

    Every bootstrap address is probed (TCP, TLS, Kafka, SASL handshake); the first that passes
    is enough. Then a kafka-python admin client authenticates and lists the brokers, and every
    advertised broker is probed the same way (one that refuses the settings fails the check;
    one that is down fails it only if none answers). The whole check takes at most `timeout` seconds
    (plus the time to close sockets).
    """
    deadline = time.monotonic() + timeout
    addresses = parse_bootstrap(bootstrap_servers)
    failures = []
    for host, port in addresses:
        try:
            brokers = _probe(host, port, settings, deadline, timeout)
            working = (host, port)
            break
        except ConnectionCheckError as error:
            failures.append(error)
    else:
        # A wrong setting explains every address; an unreachable one may be only one of them.
        raise next((f for f in failures if not f.retriable), failures[0])
    if brokers is None:
        brokers = _authenticated_brokers(bootstrap_servers, settings, deadline, timeout)
    # A broker that is down (a rolling restart) is the cluster's business, and its clients cope;
    # settings it refuses, or advertised addresses that no client can use, are not.
    reachable, down = working in [(h, p) for _, h, p in brokers], None
    for node, host, port in brokers:
        if (host, port) == working:
            continue
        try:
            _probe(host, port, settings, deadline, timeout)
            reachable = True
        except ConnectionCheckError as error:
            failure = ConnectionCheckError(
                f"the bootstrap address works, but the cluster advertises broker {node} at "
                f"{host}:{port}, where clients fail ({error}); a broker must advertise the "
                "address and protocol clients reach it by", error.retriable)
            if not error.retriable:
                raise failure from None
            down = down or failure
    if down is not None and not reachable:
        if len(brokers) == 1:
            # The bootstrap address answered, so the cluster's one broker is up: the address it
            # advertises is wrong for this client, not down.
            raise ConnectionCheckError(str(down), retriable=False) from None
        raise down


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


class _Closed(Exception):
    """The peer closed the connection (or sent what no Kafka broker sends)."""


def _probe(host: str, port: int, settings: SecuritySettings, deadline: float,
           timeout: float) -> list[tuple] | None:
    """Probe one address; the brokers the cluster advertises (None when SASL hides them)."""
    address = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=_remaining(deadline))
    except (OSError, TimeoutError) as error:
        message, retriable = _classify(error, address, settings, timeout)
        raise ConnectionCheckError(message, retriable) from None
    try:
        if settings.tls:
            sock = _tls_handshake(sock, host, port, settings, deadline, timeout)
        try:
            _api_versions(sock, deadline)
        except (_Closed, OSError) as error:
            if settings.tls and _closed(error):
                # A broker that refuses the client certificate sends an alert and closes; the
                # request may have crossed the alert, which is then lost with the connection.
                error = _alert_after_handshake(host, port, settings, deadline) or error
                if _closed(error):
                    raise ConnectionCheckError(
                        f"{address} closed the connection right after the TLS handshake: if it "
                        "requires client certificates (mutual TLS), give --ssl-certfile and "
                        "--ssl-keyfile of one signed by a CA it trusts", False) from None
            if isinstance(error, ssl.SSLError) or settings.tls:
                message, retriable = _classify(error, address, settings, timeout)
                raise ConnectionCheckError(message, retriable) from None
            if _speaks_tls(host, port, deadline):
                raise ConnectionCheckError(
                    f"{address} speaks TLS, but the security protocol is "
                    f"{settings.security_protocol}: use {_with_tls(settings)} (and "
                    f"--ssl-cafile if its CA is not one the system trusts)", False) from None
            message, retriable = _classify(error, address, settings, timeout)
            raise ConnectionCheckError(message, retriable) from None
        if settings.sasl:
            _sasl_handshake(sock, address, settings, deadline)
            return None  # what the cluster advertises is read after authentication
        brokers = _advertised_brokers(sock, deadline)
    finally:
        sock.close()
    if brokers is None:  # the listener answered ApiVersions but not Metadata
        with socket.create_connection((host, port), timeout=_remaining(deadline)) as plain:
            _no_sasl_needed(plain, address, settings, deadline)
    return brokers


def _tls_handshake(sock, host, port, settings, deadline, timeout):
    address = f"{host}:{port}"
    context = settings.ssl_context()
    tls = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    # A plaintext Kafka listener may wait for the rest of what it takes for a huge request
    # (Apache Kafka closes at once): keep half the time to ask it in plaintext.
    tls.settimeout(max(0.001, _remaining(deadline) / 2))
    try:
        tls.do_handshake()
        return tls
    except ssl.SSLCertVerificationError as error:
        tls.close()
        message, _ = _classify(error, address, settings, timeout)
        raise ConnectionCheckError(message, False) from None
    except (ssl.SSLError, OSError) as error:
        tls.close()
        if _not_tls(error) and _speaks_plain_kafka(host, port, deadline):
            raise ConnectionCheckError(
                f"{address} is a plaintext listener, but the security protocol is "
                f"{settings.security_protocol}: use "
                f"{_without_tls(settings, host, port, deadline)}", False) from None
        message, retriable = _classify(error, address, settings, timeout)
        raise ConnectionCheckError(message, retriable) from None


def _closed(error: BaseException) -> bool:
    return isinstance(error, (_Closed, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError,
                              ssl.SSLZeroReturnError))


def _alert_after_handshake(host, port, settings, deadline) -> ssl.SSLError | None:
    """Handshake again and wait a moment, sending nothing, for the alert of a TLS 1.3 server
    that refuses the client's certificate (or its absence) after the handshake."""
    try:
        with socket.create_connection((host, port), timeout=_remaining(deadline)) as sock:
            with settings.ssl_context().wrap_socket(sock, server_hostname=host) as tls:
                tls.settimeout(min(1.0, _remaining(deadline)))
                tls.recv(1)
    except ssl.SSLError as error:
        return None if _closed(error) else error
    except (OSError, TimeoutError):
        pass
    return None


def _not_tls(error: BaseException) -> bool:
    """What a TLS handshake with something that does not speak TLS ends in."""
    if isinstance(error, (TimeoutError, ConnectionResetError, ssl.SSLEOFError,
                          ssl.SSLZeroReturnError)):
        return True
    reason = (getattr(error, "reason", None) or "").upper()
    return any(r in reason for r in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE",
                                     "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_EOF", "HTTP_REQUEST",
                                     "UNKNOWN_PROTOCOL"))


def _with_tls(settings: SecuritySettings) -> str:
    return "--security-protocol " + ("SASL_SSL" if settings.sasl else "SSL")


def _without_tls(settings: SecuritySettings, host: str | None = None, port: int | None = None,
                 deadline: float = 0.0) -> str:
    """The protocol to use instead, on a plaintext listener: with SASL settings,
    SASL_PLAINTEXT, unless the listener at `host:port` (when given) shows it does not use SASL
    either (one piece of advice, not two in turn)."""
    if settings.sasl and host is not None:
        try:
            with socket.create_connection((host, port), timeout=_remaining(deadline)) as sock:
                error_code, offered = _ask_sasl(sock, settings.sasl_mechanism, deadline)
            if not _uses_sasl(error_code, offered, settings.sasl_mechanism):
                return "--security-protocol PLAINTEXT (it does not use SASL either)"
        except (OSError, _Closed, TimeoutError):
            pass  # no answer is no evidence
    return "--security-protocol " + ("SASL_PLAINTEXT" if settings.sasl else "PLAINTEXT")


# -- the two Kafka requests the probe sends, encoded by hand (both are stable since Kafka 0.10) --


def _request(api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(header) + len(body)) + header + body


def _recv_exact(sock, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise _Closed("the connection was closed")
        data += chunk
    return data


def _response(sock, correlation: int, deadline: float) -> bytes:
    head = _recv_exact(sock, 4, deadline)
    if head[0] in (0x15, 0x16) and head[1] == 0x03:
        raise _Closed("a TLS record")  # a TLS alert or handshake: the port speaks TLS
    (size,) = struct.unpack(">i", head)
    if not 4 <= size <= 2**24:
        raise _Closed(f"a response of {size} bytes")
    body = _recv_exact(sock, size, deadline)
    if struct.unpack(">i", body[:4])[0] != correlation:
        raise _Closed("a response to another request")
    return body[4:]


def _api_versions(sock, deadline: float) -> None:
    sock.settimeout(_remaining(deadline))
    sock.sendall(_request(_API_VERSIONS, 0, 1, b""))
    _response(sock, 1, deadline)


def _advertised_brokers(sock, deadline: float) -> list[tuple] | None:
    """Metadata v1 for no topic: the (node id, host, port) of every broker; None if the broker
    closed the connection instead of answering."""
    try:
        sock.settimeout(_remaining(deadline))
        sock.sendall(_request(_METADATA, 1, 3, struct.pack(">i", 0)))
        body = _response(sock, 3, deadline)
    except (_Closed, OSError):
        return None
    (count,) = struct.unpack(">i", body[:4])
    brokers, offset = [], 4
    for _ in range(count):
        node, length = struct.unpack(">ih", body[offset:offset + 6])
        host = body[offset + 6:offset + 6 + length].decode(errors="replace")
        offset += 6 + length
        port, rack = struct.unpack(">ih", body[offset:offset + 6])
        offset += 6 + max(rack, 0)
        brokers.append((node, host, port))
    return brokers


def _ask_sasl(sock, mechanism: str, deadline: float) -> tuple[int, list[str]]:
    """Send a SaslHandshake for `mechanism`: (Kafka error code, mechanisms the broker lists)."""
    name = mechanism.encode()
    sock.settimeout(_remaining(deadline))
    sock.sendall(_request(_SASL_HANDSHAKE, 1, 2, struct.pack(">h", len(name)) + name))
    body = _response(sock, 2, deadline)
    (error_code,) = struct.unpack(">h", body[:2])
    return error_code, _strings(body[2:])


def _uses_sasl(error_code: int, offered: list[str], mechanism: str) -> bool:
    # Apache Kafka answers ILLEGAL_SASL_STATE on a listener without SASL, and tansu refuses
    # the very mechanism it lists; a SASL listener accepts it or lists others.
    if error_code == _ILLEGAL_SASL_STATE:
        return False
    return error_code == 0 or (error_code == _UNSUPPORTED_SASL_MECHANISM
                               and mechanism not in offered)


def _sasl_handshake(sock, address: str, settings: SecuritySettings, deadline: float) -> None:
    """SASL settings: is the mechanism offered on this listener?"""
    mechanism = settings.sasl_mechanism
    try:
        error_code, offered = _ask_sasl(sock, mechanism, deadline)
    except (_Closed, OSError):
        raise ConnectionCheckError(
            f"{address} closed the connection when asked for SASL {mechanism}: the broker does "
            "not offer that mechanism (or this listener does not use SASL)", False) from None
    if not _uses_sasl(error_code, offered, mechanism):
        raise ConnectionCheckError(
            f"{address} does not use SASL, but the security protocol is "
            f"{settings.security_protocol}: use --security-protocol "
            f"{'SSL' if settings.tls else 'PLAINTEXT'}", False)
    if error_code == _UNSUPPORTED_SASL_MECHANISM:
        raise ConnectionCheckError(
            f"{address} does not offer SASL {mechanism}; it offers "
            f"{', '.join(offered) or 'none'}: set --sasl-mechanism accordingly", False)
    if error_code != 0:
        raise ConnectionCheckError(f"{address} refused the SASL handshake (Kafka error code "
                                   f"{error_code})", False)


def _no_sasl_needed(sock, address: str, settings: SecuritySettings, deadline: float) -> None:
    """Settings without SASL: does this listener require it? (A client that skips SASL on a
    SASL listener gets its ApiVersions answered, then the connection closed, in a loop.)"""
    try:
        error_code, offered = _ask_sasl(sock, "SCRAM-SHA-512", deadline)
    except (_Closed, OSError):
        return  # no answer is no evidence
    if _uses_sasl(error_code, offered, "SCRAM-SHA-512"):
        mechanisms = ", ".join(m for m in offered if m in MECHANISMS) or "SASL"
        raise ConnectionCheckError(
            f"{address} requires SASL authentication (it offers {mechanisms}), but the security "
            f"protocol is {settings.security_protocol}: use --security-protocol "
            f"{'SASL_SSL' if settings.tls else 'SASL_PLAINTEXT'} with --sasl-mechanism, "
            f"--sasl-username and the password", False)


def _strings(data: bytes) -> list[str]:
    (count,) = struct.unpack(">i", data[:4])
    out, offset = [], 4
    for _ in range(max(count, 0)):
        (length,) = struct.unpack(">h", data[offset:offset + 2])
        out.append(data[offset + 2:offset + 2 + length].decode(errors="replace"))
        offset += 2 + length
    return out


def _speaks_plain_kafka(host: str, port: int, deadline: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=_remaining(deadline)) as sock:
            _api_versions(sock, deadline)
            return True
    except (OSError, _Closed, TimeoutError):
        return False


def _speaks_tls(host: str, port: int, deadline: float) -> bool:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only: does it answer in TLS at all?
    try:
        with socket.create_connection((host, port), timeout=_remaining(deadline)) as sock:
            with context.wrap_socket(sock, server_hostname=host):
                return True
    except (OSError, TimeoutError):
        return False


# -- kafka-python's part ---------------------------------------------------------------------------


def _authenticated_brokers(bootstrap_servers: str, settings: SecuritySettings, deadline: float,
                           timeout: float) -> list[tuple]:
    """SASL: authenticate with kafka-python, as the service's clients will, and list the
    brokers the cluster advertises."""
    from kafka import KafkaAdminClient

    try:
        ms = int(1000 * _remaining(deadline))
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="advsvm-check",
                                 bootstrap_timeout_ms=ms, request_timeout_ms=max(ms, 1000),
                                 **settings.client_kwargs())
    except Exception as error:  # noqa: BLE001 - every failure becomes one line
        message, retriable = _classify(error, bootstrap_servers, settings, timeout)
        raise ConnectionCheckError(message, retriable) from None
    try:
        cluster = admin.describe_cluster()
    except Exception as error:  # noqa: BLE001
        raise ConnectionCheckError(
            f"authenticated at {bootstrap_servers}, but the brokers the cluster advertises did "
            f"not answer ({explain(error, settings=settings)}): check their advertised "
            "listeners", True) from None
    finally:
        admin.close()
    return [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]]


# -- explaining errors ----------------------------------------------------------------------------


def explain(error: BaseException, address: str | None = None,
            settings: SecuritySettings | None = None) -> str:
    """One line that says what `error` (from kafka-python, `ssl` or `socket`, or anything
    whose cause is one of those) means for a user connecting to `address`."""
    return _classify(error, address, settings)[0]


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        for arg in getattr(error, "args", ()):
            if isinstance(arg, BaseException):
                yield arg
        error = error.__cause__ or error.__context__


_CLIENT_CERT_REQUIRED = ("CERTIFICATE_REQUIRED", "PEER_DID_NOT_RETURN_A_CERTIFICATE")
_CLIENT_CERT_REFUSED = ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "ACCESS_DENIED",
                        "DECRYPT_ERROR", "UNSUPPORTED_CERTIFICATE", "CERTIFICATE_EXPIRED")


def _classify(error, address=None, settings=None, timeout=None):
    """(one line, retriable) for `error`."""
    from kafka import errors as kafka_errors

    where = address or "the broker"
    settings = settings or SecuritySettings()
    for cause in _chain(error):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return _certificate(cause, where, settings), False
        if isinstance(cause, ssl.SSLError):
            line = _tls(cause, where, settings)
            if line is not None:
                return line, False
        if isinstance(cause, kafka_errors.SaslAuthenticationFailedError):
            detail = str(cause).split(":", 1)[-1].strip()
            return (f"SASL {settings.sasl_mechanism} authentication as "
                    f"{settings.sasl_username!r} failed at {where}: wrong user name or "
                    f"password{f' ({detail})' if detail else ''}"), False
        if isinstance(cause, kafka_errors.UnsupportedSaslMechanismError):
            return (f"{where} does not offer SASL {settings.sasl_mechanism} "
                    f"({str(cause).split('. ', 1)[-1]})"), False
        if isinstance(cause, kafka_errors.IllegalSaslStateError):
            return f"{where} does not use SASL: use --security-protocol PLAINTEXT or SSL", False
        if isinstance(cause, kafka_errors.AuthorizationError):
            user = f"user {settings.sasl_username!r}" if settings.sasl else "this client"
            return (f"{where}: {user} is not allowed to do this ({type(cause).__name__}): "
                    "ask the cluster's administrator for ACLs"), False
        if isinstance(cause, ConnectionRefusedError):
            return f"nothing listens on {where} (connection refused)", True
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve the host name of {where} ({cause.strerror})", True
        if isinstance(cause, (TimeoutError, kafka_errors.KafkaTimeoutError)):
            if settings.sasl and isinstance(cause, kafka_errors.KafkaTimeoutError):
                return (f"{where} accepted the connection, but SASL {settings.sasl_mechanism} "
                        f"authentication as {settings.sasl_username!r} did not complete within "
                        f"{_seconds(timeout)}: wrong user name or password, or no "
                        f"{settings.sasl_mechanism} credentials for this user"), False
            return f"no answer from {where} within {_seconds(timeout)}", True
        if isinstance(cause, (ConnectionResetError, BrokenPipeError, _Closed)):
            return f"{where} closed the connection ({cause})", True
    return f"cannot connect to {where}: {error}", True


def _seconds(timeout) -> str:
    return "the time allowed" if timeout is None else f"{round(timeout, 1):g}s"


def _certificate(error: ssl.SSLCertVerificationError, where: str, settings) -> str:
    code = getattr(error, "verify_code", None)
    if code in (62, 64):  # host name / IP address mismatch
        host = where.rsplit(":", 1)[0]
        return (f"the certificate of {where} is not valid for the name {host}: connect by a "
                "name it holds (see its subjectAltName), or --no-ssl-check-hostname")
    if code == 10:
        return f"the certificate of {where} has expired"
    if code == 9:
        return f"the certificate of {where} is not valid yet (check the clocks)"
    if code in (2, 18, 19, 20, 21):
        if settings.ssl_cafile:
            return (f"the certificate of {where} is not signed by the CA in "
                    f"{settings.ssl_cafile} (wrong --ssl-cafile?)")
        return (f"the certificate of {where} is not signed by a CA this system trusts: give "
                "the CA that signed it with --ssl-cafile")
    return f"the certificate of {where} was refused: {error.verify_message}"


def _tls(error: ssl.SSLError, where: str, settings) -> str | None:
    reason = (error.reason or "").upper()
    if any(r in reason for r in _CLIENT_CERT_REQUIRED) or (
            "HANDSHAKE_FAILURE" in reason and not settings.ssl_certfile):
        return (f"{where} requires a client certificate (mutual TLS): give --ssl-certfile and "
                "--ssl-keyfile")
    if any(r in reason for r in _CLIENT_CERT_REFUSED):
        if settings.ssl_certfile:
            return (f"{where} refused the client certificate {settings.ssl_certfile} "
                    f"({error.reason}): is it signed by a CA the broker trusts, and valid?")
        return f"{where} refused the TLS handshake ({error.reason})"
    if "PROTOCOL_VERSION" in reason or "UNSUPPORTED_PROTOCOL" in reason:
        return f"{where} and this client share no TLS version (the client needs TLS 1.2+)"
    if _not_tls(error):
        return (f"{where} did not answer in TLS: if it is a plaintext listener, use "
                f"{_without_tls(settings)}")
    if reason:
        return f"TLS with {where} failed ({error.reason})"
    return None
