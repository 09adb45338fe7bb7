"""Helpers of the TLS tests: a throwaway PKI, and a TLS terminator in front of a local broker.

`make_pki` writes a CA, a server certificate for 127.0.0.1 and localhost, client
certificates (one signed by the CA, one by another CA) and the odd files the error messages
are about, all with the `cryptography` package. `TlsProxy` is a small TLS server on
127.0.0.1 that forwards each connection to a plaintext port, checking client certificates if
asked (mutual TLS). `TlsBroker` is a tansu broker that advertises the proxy's address, so that
a client that bootstraps through the proxy also fetches and produces through it.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import selectors
import socket
import ssl
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from river_advsvm.streams.broker import LOOPBACK, LocalBroker, free_port


@dataclasses.dataclass
class Pki:
    """Paths of the files `make_pki` wrote (all PEM unless said otherwise)."""

    ca: str  # the CA that signed the server and the good client certificate
    other_ca: str  # a CA that signed nothing the broker shows
    server_cert: str
    server_key: str
    wrong_name_cert: str  # signed by `ca`, for the name elsewhere.invalid only
    wrong_name_key: str
    client_cert: str
    client_key: str
    client_bundle: str  # client certificate and key in one file (a PEM "key store")
    client_key_encrypted: str  # the client key, encrypted with `key_password`
    key_password: str
    untrusted_client_cert: str  # signed by `other_ca`
    untrusted_client_key: str
    jks: str  # a file that starts like a Java key store
    not_pem: str  # text without a certificate


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: str, key, issuer: str, issuer_key, *, ca=False, names=(), client=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False), critical=True)
    else:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names:
        alt = [x509.IPAddress(ipaddress.ip_address(n)) if n[0].isdigit() else x509.DNSName(n)
               for n in names]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: str, *parts: bytes) -> str:
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)
    return path


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


def make_pki(directory) -> Pki:
    """Write a fresh CA, server and client certificates to `directory`."""
    d = str(directory)
    ca_key, other_key = _key(), _key()
    ca = _certificate("advsvm test CA", ca_key, "advsvm test CA", ca_key, ca=True)
    other = _certificate("another CA", other_key, "another CA", other_key, ca=True)
    server_key, wrong_key, client_key, untrusted_key = _key(), _key(), _key(), _key()
    server = _certificate("broker", server_key, "advsvm test CA", ca_key,
                          names=("127.0.0.1", "localhost"))
    wrong = _certificate("elsewhere", wrong_key, "advsvm test CA", ca_key,
                         names=("elsewhere.invalid",))
    client = _certificate("advsvm", client_key, "advsvm test CA", ca_key, client=True)
    untrusted = _certificate("advsvm", untrusted_key, "another CA", other_key, client=True)
    password = "key pass"
    return Pki(
        ca=_write(os.path.join(d, "ca.pem"), _pem(ca)),
        other_ca=_write(os.path.join(d, "other-ca.pem"), _pem(other)),
        server_cert=_write(os.path.join(d, "server.pem"), _pem(server), _pem(ca)),
        server_key=_write(os.path.join(d, "server.key"), _key_pem(server_key)),
        wrong_name_cert=_write(os.path.join(d, "wrong-name.pem"), _pem(wrong), _pem(ca)),
        wrong_name_key=_write(os.path.join(d, "wrong-name.key"), _key_pem(wrong_key)),
        client_cert=_write(os.path.join(d, "client.pem"), _pem(client)),
        client_key=_write(os.path.join(d, "client.key"), _key_pem(client_key)),
        client_bundle=_write(os.path.join(d, "client-bundle.pem"), _pem(client),
                             _key_pem(client_key)),
        client_key_encrypted=_write(os.path.join(d, "client-encrypted.key"),
                                    _key_pem(client_key, password)),
        key_password=password,
        untrusted_client_cert=_write(os.path.join(d, "untrusted.pem"), _pem(untrusted)),
        untrusted_client_key=_write(os.path.join(d, "untrusted.key"), _key_pem(untrusted_key)),
        jks=_write(os.path.join(d, "truststore.jks"), b"\xfe\xed\xfe\xed" + bytes(60)),
        not_pem=_write(os.path.join(d, "not-a-cert.pem"), b"hello\n"),
    )


class TlsProxy:
    """A TLS terminator on 127.0.0.1 that forwards every connection to `target_port`.

    Parameters
    ----------
    target_port
        The plaintext loopback port connections are forwarded to.
    certfile, keyfile
        The server certificate (chain) and key.
    client_cafile
        If given, clients must show a certificate signed by this CA (mutual TLS).

    One thread per connection: the handshake runs on a blocking socket, so that a refused
    client gets the TLS alert a real broker sends (asyncio's TLS drops it), then the thread
    relays bytes both ways until either side closes. `handshake_errors` lists the handshakes
    the proxy refused.
    """

    def __init__(self, target_port: int, certfile: str, keyfile: str,
                 client_cafile: str | None = None):
        self.target_port = target_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certfile, keyfile)
        if client_cafile:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(client_cafile)
        self.handshake_errors: list[str] = []
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> TlsProxy:
        self._thread = threading.Thread(target=self._accept, name="tls-proxy", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _track(self, *socks) -> bool:
        with self._lock:
            if self._stopped.is_set():
                return False
            self._open.update(socks)
            return True

    def _serve(self, conn: socket.socket) -> None:
        upstream = None
        try:
            conn.settimeout(30)
            try:
                tls = self.context.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError) as error:
                self.handshake_errors.append(repr(error))
                return
            conn = tls
            conn.settimeout(None)
            upstream = socket.create_connection((LOOPBACK, self.target_port))
            if self._track(conn, upstream):
                _relay(conn, upstream)
        except OSError:
            pass
        finally:
            for sock in (conn, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()

    def stop(self) -> None:
        with self._lock:
            self._stopped.set()
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._listener.close()
        if self._thread is not None:
            self._thread.join(10)


def _relay(tls: ssl.SSLSocket, plain: socket.socket) -> None:
    """Copy bytes both ways until one side closes (one thread: an SSL socket must not be
    read and written by two threads at once)."""
    with selectors.DefaultSelector() as selector:
        selector.register(tls, selectors.EVENT_READ, plain)
        selector.register(plain, selectors.EVENT_READ, tls)
        while True:
            ready = [key for key, _ in selector.select()]
            if tls.pending():  # decrypted bytes already buffered count as readable too
                ready.append(selector.get_key(tls))
            for key in ready:
                try:
                    data = key.fileobj.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                if not data:
                    return
                key.data.sendall(data)


class TlsBroker:
    """A tansu broker behind a `TlsProxy`: it advertises the proxy's address, so every
    connection a client makes (bootstrap, then the broker it was told about) goes through TLS.

    `bootstrap_servers` is the TLS address; `plain_bootstrap_servers` the broker's own.
    """

    def __init__(self, pki: Pki, log_path: str | None = None, client_cafile: str | None = None,
                 certfile: str | None = None, keyfile: str | None = None):
        self.broker_port = free_port()
        self.proxy = TlsProxy(self.broker_port, certfile or pki.server_cert,
                              keyfile or pki.server_key, client_cafile)
        self.log_path = log_path
        self.broker: LocalBroker | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address

    @property
    def plain_bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def start(self) -> TlsBroker:
        self.proxy.start()
        self.broker = LocalBroker(port=self.broker_port, log_path=self.log_path,
                                  advertised_port=self.proxy.port).start()
        return self

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
        self.proxy.stop()
