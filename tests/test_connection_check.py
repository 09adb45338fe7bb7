"""TLS end to end through a real TLS terminator in front of the bundled broker, and the start-up
connection check's one-line diagnoses of every misconfiguration we can stage on loopback."""

from __future__ import annotations

import socket
import ssl
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")
pytest.importorskip("cryptography")

from kafka import errors as kafka_errors  # noqa: E402

from kafka_helpers import wait_until  # noqa: E402
from river_advsvm.streams.broker import LocalBroker, free_port  # noqa: E402
from river_advsvm.streams.connection_check import (  # noqa: E402
    ConnectionCheckError,
    check_connection,
    explain,
    parse_bootstrap,
)
from river_advsvm.streams.security import SecuritySettings  # noqa: E402
from tls_helpers import TlsProxy  # noqa: E402

pytestmark = pytest.mark.kafka

TIMEOUT = 10.0


@pytest.fixture
def proxy_to(pki):
    """A TLS terminator in front of any plaintext port (the broker behind still advertises its
    own address), with the certificate a test chooses."""
    started = []

    def start(port, certfile=pki.server_cert, keyfile=pki.server_key):
        proxy = TlsProxy(port, certfile, keyfile).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def tls(pki, **extra) -> SecuritySettings:
    return SecuritySettings(**{"security_protocol": "SSL", "ssl_cafile": pki.ca, **extra})


def mutual(pki, cert=None, key=None) -> SecuritySettings:
    return tls(pki, ssl_certfile=cert or pki.client_cert, ssl_keyfile=key or pki.client_key)


def round_trip(bootstrap: str, settings: SecuritySettings, count: int = 20) -> list[bytes]:
    """Create a topic, produce `count` messages and consume them back, every client with
    `settings.client_kwargs()`."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = f"tls-{uuid.uuid4().hex[:8]}"
    kwargs = settings.client_kwargs()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, bootstrap_timeout_ms=10000, **kwargs)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    sent = [f"message {i}".encode() for i in range(count)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                             bootstrap_timeout_ms=10000, **kwargs)
    try:
        for value in sent:
            producer.send(topic, value, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             bootstrap_timeout_ms=10000, **kwargs)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        received = []
        for _ in range(300):
            for records in consumer.poll(timeout_ms=100).values():
                received.extend(r.value for r in records)
            if len(received) >= count:
                break
        return received
    finally:
        consumer.close()


# -- end to end ------------------------------------------------------------------------------------


def test_clients_produce_and_consume_through_tls(tls_broker, pki):
    settings = tls(pki)
    check_connection(tls_broker.bootstrap_servers, settings, TIMEOUT)
    assert round_trip(tls_broker.bootstrap_servers, settings) == [
        f"message {i}".encode() for i in range(20)]
    # The terminator really was in the way: TLS is all the broker's advertised address speaks.
    with pytest.raises(ConnectionCheckError, match="speaks TLS"):
        check_connection(tls_broker.bootstrap_servers, SecuritySettings(), TIMEOUT)


def test_clients_produce_and_consume_with_mutual_tls(mtls_broker, pki):
    settings = mutual(pki)
    check_connection(mtls_broker.bootstrap_servers, settings, TIMEOUT)
    assert len(round_trip(mtls_broker.bootstrap_servers, settings, count=5)) == 5
    bundle = tls(pki, ssl_certfile=pki.client_bundle)  # certificate and key in one file
    check_connection(mtls_broker.bootstrap_servers, bundle, TIMEOUT)


def test_host_name_checks_can_be_turned_off(broker, pki, proxy_to):
    proxy = proxy_to(broker.port, pki.wrong_name_cert, pki.wrong_name_key)
    with pytest.raises(ConnectionCheckError, match="not valid for the name 127.0.0.1"):
        check_connection(proxy.address, tls(pki), TIMEOUT)
    # Without the check, the handshake passes; then the broker's advertised (plaintext)
    # address is what fails, as it would for every client.
    with pytest.raises(ConnectionCheckError, match="advertises broker .* plaintext listener"):
        check_connection(proxy.address, tls(pki, ssl_check_hostname=False), timeout=4)


# -- misconfigurations: one line each, and not retriable -------------------------------------------


def diagnose(bootstrap: str, settings: SecuritySettings,
             timeout: float = TIMEOUT) -> ConnectionCheckError:
    with pytest.raises(ConnectionCheckError) as error:
        check_connection(bootstrap, settings, timeout)
    assert "\n" not in str(error.value)
    return error.value


def test_wrong_ca(tls_broker, pki):
    error = diagnose(tls_broker.bootstrap_servers, tls(pki, ssl_cafile=pki.other_ca))
    assert str(error) == (f"the certificate of {tls_broker.bootstrap_servers} is not signed by "
                          f"the CA in {pki.other_ca} (wrong --ssl-cafile?)")
    assert not error.retriable
    error = diagnose(tls_broker.bootstrap_servers, SecuritySettings(security_protocol="SSL"))
    assert "not signed by a CA this system trusts: give the CA that signed it with " \
           "--ssl-cafile" in str(error)


def test_plaintext_client_against_tls(tls_broker):
    error = diagnose(tls_broker.bootstrap_servers, SecuritySettings())
    assert str(error).startswith(f"{tls_broker.bootstrap_servers} speaks TLS, but the security "
                                 "protocol is PLAINTEXT: use --security-protocol SSL")
    assert not error.retriable


def test_tls_client_against_plaintext(broker, pki):
    # tansu waits for the rest of what a TLS hello looks like to it (Apache Kafka closes at
    # once): the check keeps half its time to ask in plaintext.
    error = diagnose(broker.bootstrap_servers, tls(pki), timeout=4)
    assert str(error) == (f"{broker.bootstrap_servers} is a plaintext listener, but the "
                          "security protocol is SSL: use --security-protocol PLAINTEXT")
    assert not error.retriable


def test_mutual_tls_without_or_with_an_untrusted_client_certificate(mtls_broker, pki):
    error = diagnose(mtls_broker.bootstrap_servers, tls(pki))
    assert str(error) == (f"{mtls_broker.bootstrap_servers} requires a client certificate "
                          "(mutual TLS): give --ssl-certfile and --ssl-keyfile")
    error = diagnose(mtls_broker.bootstrap_servers,
                     mutual(pki, pki.untrusted_client_cert, pki.untrusted_client_key))
    assert str(error).startswith(f"{mtls_broker.bootstrap_servers} refused the client "
                                 f"certificate {pki.untrusted_client_cert}")
    assert not error.retriable
    # The proxy records the refusal after its alert went out: wait for the record.
    wait_until(lambda: any("CERTIFICATE_VERIFY_FAILED" in e
                           for e in mtls_broker.proxy.handshake_errors),
               timeout=10, what="the terminator to record the refused certificate")


def test_sasl_over_tls_against_a_plaintext_listener_without_sasl_is_one_piece_of_advice(
        broker, pki):
    """SASL_SSL against a plaintext listener that does not use SASL advised SASL_PLAINTEXT,
    whose check then advised PLAINTEXT: one step at a time. The listener is asked both."""
    settings = tls(pki, security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                   sasl_username="alice", sasl_password="x")
    error = diagnose(broker.bootstrap_servers, settings, timeout=4)
    assert str(error) == (f"{broker.bootstrap_servers} is a plaintext listener, but the "
                          "security protocol is SASL_SSL: use --security-protocol PLAINTEXT "
                          "(it does not use SASL either)")
    assert not error.retriable


def test_a_broker_that_advertises_an_address_clients_cannot_use(broker, pki, proxy_to):
    proxy = proxy_to(broker.port)
    error = diagnose(proxy.address, tls(pki), timeout=4)
    assert str(error).startswith(
        f"the bootstrap address works, but the cluster advertises broker 111 at "
        f"{broker.bootstrap_servers}, where clients fail ({broker.bootstrap_servers} is a "
        "plaintext listener")


def test_a_single_broker_advertising_a_dead_address_is_a_wrong_setting(tmp_path):
    """The bootstrap address answers, the one broker of the cluster advertises an address
    where nothing listens: its advertised listener is wrong (a setting, exit status 4), not a
    broker that is down; it was judged retriable and the service waited out its connect
    timeout, then exited with status 3 (restart)."""
    dead = free_port()
    local = LocalBroker(log_path=str(tmp_path / "broker.log"), advertised_port=dead).start()
    try:
        error = diagnose(local.bootstrap_servers, SecuritySettings(), timeout=4)
    finally:
        local.stop()
    assert str(error).startswith("the bootstrap address works, but the cluster advertises "
                                 f"broker 111 at 127.0.0.1:{dead}, where clients fail")
    assert not error.retriable


def test_sasl_client_against_a_listener_without_sasl(broker):
    settings = SecuritySettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                sasl_username="alice", sasl_password="x")
    error = diagnose(broker.bootstrap_servers, settings)
    assert str(error) == (f"{broker.bootstrap_servers} does not use SASL, but the security "
                          "protocol is SASL_PLAINTEXT: use --security-protocol PLAINTEXT")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """tansu with --authentication: it takes SCRAM handshakes, but (0.6.0) no client completes
    an authentication, and users cannot be created on it (see the module's test below)."""
    local = LocalBroker(log_path=str(tmp_path_factory.mktemp("sasl") / "broker.log"),
                        options=("--authentication",)).start()
    yield local
    local.stop()


def test_plaintext_client_against_a_sasl_listener(sasl_broker):
    error = diagnose(sasl_broker.bootstrap_servers, SecuritySettings())
    assert str(error).startswith(f"{sasl_broker.bootstrap_servers} requires SASL authentication "
                                 "(it offers SCRAM-SHA-512), but the security protocol is "
                                 "PLAINTEXT: use --security-protocol SASL_PLAINTEXT")
    assert not error.retriable


def test_sasl_credentials_the_broker_does_not_accept(sasl_broker):
    # What an operator sees with a wrong password here: authentication never completes.
    settings = SecuritySettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                sasl_username="alice", sasl_password="wrong")
    with pytest.raises(ConnectionCheckError) as error:
        check_connection(sasl_broker.bootstrap_servers, settings, timeout=3)
    assert "SASL SCRAM-SHA-512 authentication as 'alice' did not complete within 3s" in str(
        error.value)
    assert not error.value.retriable
    plain = SecuritySettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_username="alice", sasl_password="x")
    error = diagnose(sasl_broker.bootstrap_servers, plain)
    assert "closed the connection when asked for SASL PLAIN" in str(error)


def test_nothing_listening_is_retriable_and_one_good_address_is_enough(broker):
    dead = f"127.0.0.1:{free_port()}"
    error = diagnose(dead, SecuritySettings())
    assert str(error) == f"nothing listens on {dead} (connection refused)" and error.retriable
    check_connection(f"{dead},{broker.bootstrap_servers}", SecuritySettings(), TIMEOUT)


def test_a_listener_prefix_in_the_bootstrap_address_is_ignored_as_the_clients_do(broker):
    """`PLAINTEXT://host:9092` (as a broker's `listeners` spell it): the Kafka clients, Java's
    and kafka-python, drop the prefix; the start-up check took it for part of the host name,
    so the service waited for a broker it never resolved and exited with status 3."""
    assert parse_bootstrap("SASL_SSL://b:9093, PLAINTEXT://[::1]:9092") == [
        ("b", 9093), ("::1", 9092)]
    check_connection(f"PLAINTEXT://{broker.bootstrap_servers}", SecuritySettings(), TIMEOUT)


def test_a_silent_port_is_a_retriable_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ConnectionCheckError) as error:
            check_connection(address, SecuritySettings(), timeout=0.5)
    assert str(error.value) == f"no answer from {address} within 0.5s"
    assert error.value.retriable


# -- explaining exceptions raised elsewhere --------------------------------------------------------


def _raised_from(cause: BaseException, wrapper: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException:
            raise wrapper  # noqa: B904 - the implicit chain is what kafka-python produces
    except BaseException as error:
        return error


def test_explain_reads_through_kafka_python_wrappers(pki):
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_code, verify.verify_message = 10, "certificate has expired"
    wrapped = _raised_from(verify, kafka_errors.KafkaConnectionError("Handshake failed: ..."))
    assert explain(wrapped, "b:9093") == "the certificate of b:9093 has expired"
    sasl = SecuritySettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                            sasl_username="bob", sasl_password="x")
    failed = kafka_errors.SaslAuthenticationFailedError(
        "SaslAuthenticationFailedError: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert explain(failed, "b:9093", sasl).startswith(
        "SASL SCRAM-SHA-256 authentication as 'bob' failed at b:9093: wrong user name or password")
    unsupported = kafka_errors.UnsupportedSaslMechanismError(
        "Kafka broker does not support SCRAM-SHA-256 sasl mechanism. Enabled mechanisms: "
        "['PLAIN']")
    assert explain(unsupported, "b:9093", sasl) == (
        "b:9093 does not offer SASL SCRAM-SHA-256 (Enabled mechanisms: ['PLAIN'])")
    denied = kafka_errors.TopicAuthorizationFailedError()
    assert "user 'bob' is not allowed" in explain(denied, "b:9093", sasl)
    assert explain(socket.gaierror(-2, "Name or service not known"), "nope:9092") == (
        "cannot resolve the host name of nope:9092 (Name or service not known)")
    required = ssl.SSLError(1, "tlsv13 alert certificate required")
    required.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    assert "requires a client certificate" in explain(required, "b:9093")


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, [::1]:9093,b.example.com:9092") == [
        ("a", 1), ("::1", 9093), ("b.example.com", 9092)]
    for bad in ["a", "a:", ":9092", "a:0", "a:65536", "a:x", "[]:9092", "a:\u0669\u0660"]:
        with pytest.raises(ValueError, match="is not HOST:PORT"):
            parse_bootstrap(bad)


@pytest.mark.parametrize("bad", ["[::1:9092", "::1]:9092", "[[::1]]:9092", "[a]b:9092",
                                 "a[b]:9092"])
def test_parse_bootstrap_refuses_unbalanced_brackets(bad):
    # "[::1:9092" was taken as host ":" (or "::1"): a typo that read as an unreachable broker,
    # exit status 3 (restarted for ever), instead of a usage error.
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_bootstrap(bad)


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_parse_bootstrap_takes_any_text(text):
    """Any text is a list of (non-empty host, port in 1..65535) or a ValueError naming the
    address ('[]:9092' was an empty host, Arabic-Indic digits a port)."""
    try:
        addresses = parse_bootstrap(text)
    except ValueError as error:
        assert "is not HOST:PORT" in str(error)
        return
    assert addresses and len(addresses) == text.count(",") + 1
    for host, port in addresses:
        assert host and host == host.strip("[]") and host in text
        assert type(port) is int and 0 < port < 65536


@pytest.mark.parametrize("port_range, below", [("40000\t60999\n", 40000), ("1024 60999", None),
                                               (None, None)])
def test_a_free_port_is_taken_below_the_range_of_outgoing_connections(tmp_path, monkeypatch,
                                                                      port_range, below):
    """A port from the range the system gives outgoing connections went to one of them (a
    Kafka client's) before the service listened on it: "cannot serve metrics on
    127.0.0.1:42541: Address already in use", status 2. Below that range no connection takes
    it; where the range is unknown (or leaves no room), any free port."""
    from river_advsvm.streams import broker

    path = tmp_path / "range"
    if port_range is not None:
        path.write_text(port_range)
    monkeypatch.setattr(broker, "_EPHEMERAL_RANGE", str(path))
    for _ in range(20):
        port = free_port()
        assert port >= 1024 and (below is None or port < below)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free indeed
