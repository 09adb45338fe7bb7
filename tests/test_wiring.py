"""The security, metrics and log settings of `advsvm serve`, wired: every Kafka client gets the
security settings (SASL included: tansu 0.6.0 cannot authenticate kafka-python clients, so this
is shown on the built client configs), the flags are documented, misuse is one line, and the
exit statuses agree wherever they are listed."""

from __future__ import annotations

import argparse
import ast
import pathlib
import re

import pytest

pytest.importorskip("kafka")
pytest.importorskip("cryptography")

from river_advsvm import AdvLinearSVM  # noqa: E402
from river_advsvm.streams import cli as streams_cli  # noqa: E402
from river_advsvm.streams import security  # noqa: E402
from river_advsvm.streams.clients import Clients  # noqa: E402
from river_advsvm.streams.config import ServiceConfig  # noqa: E402
from river_advsvm.streams.security import SecuritySettings  # noqa: E402
from river_advsvm.streams.service import Service  # noqa: E402
from tls_helpers import make_pki  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def sasl_ssl(pki, mechanism="SCRAM-SHA-512") -> SecuritySettings:
    return SecuritySettings(security_protocol="SASL_SSL", ssl_cafile=pki.ca,
                            ssl_certfile=pki.client_cert, ssl_keyfile=pki.client_key_encrypted,
                            ssl_key_password=pki.key_password, ssl_check_hostname=False,
                            sasl_mechanism=mechanism, sasl_username="alice",
                            sasl_password="pa ss", client_dns_lookup="use_all_dns_ips")


@pytest.mark.parametrize("mechanism", security.MECHANISMS)
def test_every_setting_reaches_every_client_of_the_service(pki, mechanism, tmp_path):
    """The service's one `Clients` gives each kind of client (the consumer, the outputs' and
    snapshots' producer, the admin client, the snapshot reader) every security setting, and
    kafka-python takes them as they are."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    settings = sasl_ssl(pki, mechanism)
    expected = settings.client_kwargs()
    assert expected["sasl_mechanism"] == mechanism and expected["sasl_plain_password"] == "pa ss"
    config = ServiceConfig(bootstrap_servers="127.0.0.1:9", topic="t", group="g",
                           checkpoint_dir=str(tmp_path), security=settings,
                           client_settings={"api_version": (3, 0)})  # no connection on creation
    clients = Service(config, AdvLinearSVM).session.clients
    built = {
        "consumer": clients.consumer_config("g"),
        "reader": clients.reader_config(client_id="r", max_fetch_bytes=2**20),
        "producer": clients.producer_config(),
        "admin": clients.admin_config(),
    }
    for kind, options in built.items():
        assert {k: options[k] for k in expected} == expected, kind
    assert set(built["admin"]) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    consumer = clients.consumer("g")
    reader = clients.reader(client_id="r", max_fetch_bytes=2**20)
    producer = clients.producer()
    try:
        for client in (consumer, reader, producer):
            assert {k: client.config[k] for k in expected} == expected
        assert isinstance(producer, KafkaProducer) and isinstance(reader, KafkaConsumer)
    finally:
        consumer.close()
        reader.close()
        producer.close(timeout=1)


def test_the_serve_and_inspect_flags_give_those_settings(pki, monkeypatch):
    monkeypatch.setenv(security.PASSWORD_ENV, "pa ss")
    monkeypatch.setenv(security.KEY_PASSWORD_ENV, pki.key_password)
    flags = ["--security-protocol", "SASL_SSL", "--ssl-cafile", pki.ca, "--ssl-certfile",
             pki.client_cert, "--ssl-keyfile", pki.client_key_encrypted,
             "--no-ssl-check-hostname", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username",
             "alice"]
    expected = sasl_ssl(pki).client_kwargs()
    expected.pop("client_dns_lookup")  # a properties-file setting, no flag
    serve = streams_cli.build_parser().parse_args(flags)
    assert security.from_args(serve).client_kwargs() == expected
    inspect = streams_cli.build_inspect_parser().parse_args(
        ["--bootstrap-servers", "b:1", "--sync-topic", "s", *flags])
    assert security.from_args(inspect).client_kwargs() == expected


def test_every_kafka_client_is_made_by_clients():
    """No module of the service or the benchmarks makes a Kafka client of its own: they all go
    through `river_advsvm.streams.clients.Clients`, which adds the security settings (the
    connection check makes its admin client from the settings' own `client_kwargs`)."""
    makers = {"KafkaConsumer", "KafkaProducer", "KafkaAdminClient"}
    allowed = {"streams/clients.py", "streams/connection_check.py"}
    found = []
    for path in [*sorted((ROOT / "streams").glob("*.py")), *sorted((ROOT / "benchmarks").glob(
            "*.py"))]:
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            # A call of the class, or the class handed to a helper that calls it.
            if isinstance(node, ast.Name) and node.id in makers:
                found.append((name, node.lineno))
    assert {name for name, _ in found} == allowed, found
    check = (ROOT / "streams/connection_check.py").read_text()
    assert "**settings.client_kwargs()" in check


def test_security_settings_go_in_one_place():
    with pytest.raises(ValueError, match="'ssl_cafile' is a security setting"):
        ServiceConfig(bootstrap_servers="b:1", topic="t", group="g", checkpoint_dir="d",
                      client_settings={"ssl_cafile": "ca.pem"})
    with pytest.raises(ValueError, match="'acks' is fixed by the service"):
        Clients("b:1", {"acks": 1})


def test_kafka_settings_a_client_refuses_are_a_usage_error_before_any_connection():
    """kafka-python refuses a setting one kind of client does not take, and timeouts that
    contradict each other, as `KafkaConfigurationError`, a `KafkaError`: the service retried
    it for ever as a broker away. Both are a `ValueError` (status 2) when the client is made,
    before any connection (the broker at port 9 is not there)."""
    from river_advsvm.streams import lifecycle

    producer_only = Clients("127.0.0.1:9", {"delivery_timeout_ms": 5})
    clients = Clients("127.0.0.1:9", {"request_timeout_ms": 10**9})  # (the consumers check it)
    for make in (lambda: producer_only.consumer("g"), lambda: clients.consumer("g"),
                 lambda: clients.reader(client_id="r", max_fetch_bytes=2**20)):
        with pytest.raises(ValueError, match="the Kafka client settings are refused") as error:
            make()
        assert lifecycle.exit_status(error.value) == 2


@pytest.mark.parametrize("argv, environ, message", [
    (["--local-broker", "--security-protocol", "SSL"], {},
     "--local-broker starts a plaintext broker on 127.0.0.1"),
    (["--local-broker", "--workers", "2", "--metrics-port", "9400"], {},
     "--metrics-port serves one service"),
    (["--bootstrap-servers", "b:1", "--topic", "t", "--group", "g", "--checkpoint-dir", "d",
      "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"],
     {}, f"set {security.PASSWORD_ENV} or give --sasl-password-file"),
    (["--bootstrap-servers", "b:1", "--topic", "t", "--group", "g", "--checkpoint-dir", "d",
      "--security-protocol", "SSL", "--ssl-cafile", "/nonexistent/ca.pem"], {},
     "--ssl-cafile /nonexistent/ca.pem: no such file"),
    (["--bootstrap-servers", "b:1", "--topic", "t", "--group", "g", "--checkpoint-dir", "d",
      "--ssl-cafile", "ca.pem"], {}, "--ssl-cafile is a setting of SSL or SASL_SSL"),
    (["--sasl-password", "hunter2"], {}, "not taken on the command line"),
    (["--metrics-port", "70000"], {}, "a port is 0..65535"),
    (["--log-format", "xml"], {}, "invalid choice: 'xml'"),
])
def test_misused_settings_are_one_line_with_status_2(argv, environ, message, capsys,
                                                     monkeypatch):
    monkeypatch.delenv(security.PASSWORD_ENV, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    try:
        status = streams_cli.main(argv)
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("advsvm serve: "), err


def test_serve_help_documents_every_flag():
    parser = streams_cli.build_parser()
    text = parser.format_help()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or not action.option_strings:
            continue
        assert action.help, f"{action.option_strings} has no help"
        for option in action.option_strings:
            assert option in text
    for flag in ["--kafka-config", "--security-protocol", "--ssl-cafile", "--ssl-certfile",
                 "--ssl-keyfile", "--no-ssl-check-hostname", "--sasl-mechanism",
                 "--sasl-username", "--sasl-password-file", "--metrics-port", "--metrics-host",
                 "--liveness-timeout", "--log-format"]:
        assert flag in text
    assert "--sasl-password " not in text  # refused, and not advertised


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_serve_help_fits_the_terminal(monkeypatch, columns):
    """Its description and its groups' texts were single lines of up to 466 characters, its
    epilog and two lists of choices 81 to 95."""
    monkeypatch.setenv("COLUMNS", str(columns))
    text = streams_cli.build_parser().format_help()
    assert "signals and exit statuses:" in text and "\n    2    usage error:" in text
    assert max(map(len, text.splitlines())) <= columns


def _statuses(text: str, pattern: str) -> set[int]:
    return {int(n) for n in re.findall(pattern, text, re.M)}


def test_one_table_of_exit_statuses():
    """The statuses of `serve --help`, of the deployment page's table and of the service's
    docs are the same set."""
    from river_advsvm.streams import serve_parser, service

    expected = {0, 1, 2, 3, 4, 5, 130}
    assert _statuses(serve_parser.EPILOG, r"^    (\d+) ") == expected
    page = (ROOT / "docs/deployment.md").read_text()
    table = page[page.index("## Exit status"):]
    assert _statuses(table, r"^\| (\d+) \|") == expected
    assert _statuses(service.__doc__, r"^- (\d+): ") == expected
