"""`advsvm serve` through a TLS terminator in front of the bundled broker (the terminator checks
client certificates for mutual TLS), and what a misconfigured one does: exit status 4 within the
connect timeout, one line that says what is wrong.

SASL end to end is not here: tansu 0.6.0 (the bundled broker) takes SCRAM handshakes with
`--authentication` but completes no authentication with kafka-python and has no way to create
users; the settings are shown to reach every client in `test_wiring.py`, and the start-up
check's diagnoses of SASL listeners are in `test_connection_check.py`.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

pytest.importorskip("kafka")
pytest.importorskip("cryptography")

import kafka_helpers as kh  # noqa: E402
from river_advsvm.streams import cli as streams_cli  # noqa: E402
from river_advsvm.streams import clients, state  # noqa: E402
from river_advsvm.streams.broker import LocalBroker  # noqa: E402
from river_advsvm.streams.security import PASSWORD_ENV, SecuritySettings  # noqa: E402

pytestmark = pytest.mark.kafka

#: Connect timeout of the misconfigured runs: they must exit well within it.
CONNECT_TIMEOUT = 30


def tls(pki, **extra) -> SecuritySettings:
    return SecuritySettings(**{"security_protocol": "SSL", "ssl_cafile": pki.ca, **extra})


def _stream(cluster, settings, topic, n=300, seed=21):
    clients.create_topics(cluster.bootstrap_servers, {topic: 1, f"{topic}-predictions": 1},
                          security=settings)
    X, y = kh.stream(n, seed=seed)
    values = kh.messages(X, y, unlabelled_every=6)
    kh.produce(cluster.bootstrap_servers, topic, values, partition=0, security=settings)
    return values


def _serve_until_idle(cluster, topic, directory, log, *flags):
    command = kh.serve_command(cluster.bootstrap_servers, topic, f"{topic}-group", directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--exit-when-idle", "2", *flags)
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)


def _learned_and_predicted(cluster, settings, topic, values, directory, reference=True):
    labelled = sum(json.loads(v).get("y") is not None for v in values)
    assert kh.learned(directory) == labelled
    if reference:
        kh.assert_same_model(state.load(directory).model, kh.reference_model(values))
    predictions = kh.read_topic(cluster.bootstrap_servers, f"{topic}-predictions", len(values),
                                security=settings)
    assert sorted(json.loads(r.value)["id"] for r in predictions) == list(range(len(values)))


def test_serve_learns_and_predicts_through_tls(tls_broker, pki, tmp_path):
    settings = tls(pki)
    values = _stream(tls_broker, settings, "tls-served")
    directory = tmp_path / "ckpt"
    _serve_until_idle(tls_broker, "tls-served", directory, tmp_path / "service.log",
                      "--security-protocol", "SSL", "--ssl-cafile", pki.ca)
    _learned_and_predicted(tls_broker, settings, "tls-served", values, directory)


def test_mutual_tls_with_a_client_certificate_from_a_properties_file(mtls_broker, pki, tmp_path):
    """--kafka-config with a PEM key store: a group worker (snapshot topic, its admin client
    and reader) learns through mutual TLS, and `advsvm inspect` reads the group the same way."""
    properties = tmp_path / "client.properties"
    properties.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                          f"ssl.truststore.location={pki.ca}\nssl.keystore.type=PEM\n"
                          f"ssl.keystore.location={pki.client_bundle}\n")
    settings = tls(pki, ssl_certfile=pki.client_bundle)
    values = _stream(mtls_broker, settings, "mtls-served", n=200)
    directory = tmp_path / "ckpt"
    _serve_until_idle(mtls_broker, "mtls-served", directory, tmp_path / "service.log",
                      "--kafka-config", str(properties), "--sync-every", "50",
                      "--worker-id", "w0", "--gamma", "0.1")
    _learned_and_predicted(mtls_broker, settings, "mtls-served", values, directory,
                           reference=False)  # (a group's model: another gamma)

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = streams_cli.inspect_main([
            "--bootstrap-servers", mtls_broker.bootstrap_servers,
            "--sync-topic", "mtls-served-mtls-served-group-snapshots",
            "--kafka-config", str(properties)])
    assert status == 0, err.getvalue()
    group = json.loads(out.getvalue())
    assert group["workers"] == ["w0"] and group["consumed"] == len(values)
    assert group["samples_learned"] == kh.learned(directory)
    # Without the client certificate: one line that says so, status 2.
    err = io.StringIO()
    with redirect_stderr(err):
        status = streams_cli.inspect_main([
            "--bootstrap-servers", mtls_broker.bootstrap_servers,
            "--sync-topic", "mtls-served-mtls-served-group-snapshots",
            "--security-protocol", "SSL", "--ssl-cafile", pki.ca])
    assert status == 2 and err.getvalue() == (
        f"advsvm inspect: {mtls_broker.bootstrap_servers} requires a client certificate (mutual "
        "TLS): give --ssl-certfile and --ssl-keyfile\n")


def test_the_replay_and_benchmark_producers_and_the_outputs_reader_through_tls(tls_broker,
                                                                              pki):
    """The producers of `serve --local-broker` and `benchmarks/scaleout.py`, and the reader of
    the outputs it shows, take the same settings (here: TLS only works with them)."""
    import importlib.util

    from river_advsvm.streams import local

    spec = importlib.util.spec_from_file_location("scaleout", kh.REPO + "/benchmarks/scaleout.py")
    scaleout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scaleout)
    settings = tls(pki)
    clients.create_topics(tls_broker.bootstrap_servers, {"tls-replayed": 2}, security=settings)
    X, y = kh.stream(30, seed=3)
    sent = local.replay(tls_broker.bootstrap_servers, "tls-replayed", zip(X, y.tolist()),
                        unlabelled_every=3, security=settings)
    values = kh.messages(X, y, start_id=100)
    scaleout.produce(tls_broker.bootstrap_servers, "tls-replayed", values, 2, security=settings)
    read = local.read_outputs(tls_broker.bootstrap_servers, "tls-replayed", security=settings)
    ids = sorted(json.loads(value)["id"] for value in read)
    assert sent == 30 and ids == list(range(30)) + list(range(100, 130))


def _refused(bootstrap: str, tmp_path, *flags, env=None) -> str:
    """Run serve against `bootstrap` with `flags`; assert it exits with status 4 within the
    connect timeout and one line on stderr, and return that line."""
    command = [sys.executable, "-m", "river_advsvm.cli", "serve", "--bootstrap-servers",
               bootstrap, "--topic", "t", "--group", "g", "--checkpoint-dir",
               str(tmp_path / "ckpt"), "--connect-timeout", str(CONNECT_TIMEOUT), *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=CONNECT_TIMEOUT,
                            cwd=kh.REPO, env={**kh.os.environ, **(env or {})})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 4 and len(lines) == 1, result.stderr
    assert lines[0].startswith("advsvm serve: ")
    assert state.load(tmp_path / "ckpt") is None  # nothing learned, nothing written
    return lines[0][len("advsvm serve: "):]


def test_a_wrong_ca_stops_the_service_at_once(tls_broker, pki, tmp_path):
    line = _refused(tls_broker.bootstrap_servers, tmp_path, "--security-protocol", "SSL",
                    "--ssl-cafile", pki.other_ca)
    assert line == (f"the certificate of {tls_broker.bootstrap_servers} is not signed by the CA "
                    f"in {pki.other_ca} (wrong --ssl-cafile?)")


def test_plaintext_against_tls_and_tls_against_plaintext(tls_broker, broker, pki, tmp_path):
    line = _refused(tls_broker.bootstrap_servers, tmp_path / "a")
    assert line.startswith(f"{tls_broker.bootstrap_servers} speaks TLS, but the security "
                           "protocol is PLAINTEXT: use --security-protocol SSL")
    line = _refused(broker.bootstrap_servers, tmp_path / "b", "--security-protocol", "SSL",
                    "--ssl-cafile", pki.ca)
    assert line == (f"{broker.bootstrap_servers} is a plaintext listener, but the security "
                    "protocol is SSL: use --security-protocol PLAINTEXT")


def test_mutual_tls_without_a_client_certificate(mtls_broker, pki, tmp_path):
    line = _refused(mtls_broker.bootstrap_servers, tmp_path, "--security-protocol", "SSL",
                    "--ssl-cafile", pki.ca)
    assert line == (f"{mtls_broker.bootstrap_servers} requires a client certificate (mutual "
                    "TLS): give --ssl-certfile and --ssl-keyfile")
    # With one, the same listener serves (the service ran through it in another test).
    values = _stream(mtls_broker, tls(pki, ssl_certfile=pki.client_cert,
                                      ssl_keyfile=pki.client_key), "mtls-flags", n=60)
    _serve_until_idle(mtls_broker, "mtls-flags", tmp_path / "ok", tmp_path / "service.log",
                      "--security-protocol", "SSL", "--ssl-cafile", pki.ca,
                      "--ssl-certfile", pki.client_cert, "--ssl-keyfile", pki.client_key)
    assert kh.learned(tmp_path / "ok") == sum(json.loads(v).get("y") is not None for v in values)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    local = LocalBroker(log_path=str(tmp_path_factory.mktemp("sasl") / "broker.log"),
                        options=("--authentication",)).start()
    yield local
    local.stop()


def test_sasl_credentials_the_broker_does_not_accept(sasl_broker, tmp_path):
    """What an operator sees with a wrong password on this broker: authentication does not
    complete within the check's time, a refusal (status 4), not an outage (status 3)."""
    line = _refused(sasl_broker.bootstrap_servers, tmp_path, "--security-protocol",
                    "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username",
                    "alice", env={PASSWORD_ENV: "wrong"})
    assert line.startswith(f"{sasl_broker.bootstrap_servers} accepted the connection, but SASL "
                           "SCRAM-SHA-512 authentication as 'alice' did not complete within")
