"""Security settings: flags, client.properties files, and what reaches each Kafka client."""

from __future__ import annotations

import argparse
import os
import re

import pytest

pytest.importorskip("kafka")
pytest.importorskip("cryptography")

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from river_advsvm.streams import security  # noqa: E402
from river_advsvm.streams.security import SecurityError, SecuritySettings  # noqa: E402
from tls_helpers import make_pki  # noqa: E402

DEFAULTS = {"security_protocol": "PLAINTEXT"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def parse(argv, environ=None):
    parser = argparse.ArgumentParser()
    security.add_arguments(parser)
    return security.from_args(parser.parse_args(argv), environ=environ or {})


def write(tmp_path, text, name="client.properties"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- the properties file format --------------------------------------------------------------------


def test_read_properties_follows_the_java_format():
    text = ("# comment\n! also a comment\n\n"
            "a=1\nb = 2\nc:3\nd 4\n  e\t=  five  \n"
            "f=one \\\n    two\n"
            "g=back\\\\slash\n"
            "h=\\u00e9t\\u00e9\n"
            "key\\ with\\ spaces=x\n"
            "empty=\n"
            "a=last wins\r\n"
            "colon\\:key=y")
    assert security.read_properties(text) == {
        "a": "last wins", "b": "2", "c": "3", "d": "4", "e": "five  ", "f": "one two",
        "g": "back\\slash", "h": "été", "key with spaces": "x", "empty": "", "colon:key": "y",
    }


def _escape_properties(value: str) -> str:
    """How Java's Properties.store writes a value (the test's own writer)."""
    out = []
    for i, c in enumerate(value):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and i == 0:
            out.append("\\ ")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        else:
            out.append(c)
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                               max_size=12).filter(lambda k: k.strip() == k and k[0] not in "#!"),
                       st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                       max_size=6))
def test_read_properties_reads_back_what_java_writes(properties):
    def key(k):
        return _escape_properties(k).replace(" ", "\\ ")

    text = "\n".join(f"{key(k)}={_escape_properties(v)}" for k, v in properties.items())
    assert security.read_properties(text) == properties


# -- flags and files give the same clients ---------------------------------------------------------

PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF,
                                  blacklist_categories=("Cs",)), min_size=1, max_size=16)
# (argparse drops an option's value of "--", even as --sasl-username=--: such a name can only
# come from a properties file, which this strategy's flags could not match.)
NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                max_size=12).filter(lambda name: name != "--")


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(protocol=st.sampled_from(security.PROTOCOLS), ca=st.booleans(), mutual=st.booleans(),
       check_hostname=st.booleans(), mechanism=st.sampled_from(security.MECHANISMS),
       user=NAMES, password=PASSWORDS, dns=st.sampled_from([None, "use_all_dns_ips"]))
def test_flags_and_properties_file_give_the_same_client_settings(
        pki, tmp_path, protocol, ca, mutual, check_hostname, mechanism, user, password, dns):
    tls = protocol in ("SSL", "SASL_SSL")
    sasl = protocol.startswith("SASL")
    argv = ["--security-protocol", protocol]
    lines = [f"security.protocol={protocol}"]
    if tls and ca:
        argv += ["--ssl-cafile", pki.ca]
        lines += [f"ssl.truststore.location={_escape_properties(pki.ca)}",
                  "ssl.truststore.type=PEM"]
    if tls and mutual:
        argv += ["--ssl-certfile", pki.client_bundle]
        lines += [f"ssl.keystore.location={_escape_properties(pki.client_bundle)}",
                  "ssl.keystore.type=PEM"]
    if tls and not check_hostname:
        argv += ["--no-ssl-check-hostname"]
        lines += ["ssl.endpoint.identification.algorithm="]
    environ = {}
    if sasl:
        argv += ["--sasl-mechanism", mechanism, f"--sasl-username={user}"]
        environ[security.PASSWORD_ENV] = password
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        jaas = f"{module} required username={_jaas_quote(user)} password={_jaas_quote(password)};"
        lines += [f"sasl.mechanism={mechanism}", f"sasl.jaas.config={_escape_properties(jaas)}"]
    if dns:
        lines.append(f"client.dns.lookup={dns}")
    path = write(tmp_path, "\n".join(lines) + "\n")
    from_flags = parse(argv, environ)
    from_file = parse(["--kafka-config", path])
    expected = dict(from_flags.client_kwargs())
    if dns:
        expected["client_dns_lookup"] = dns
    assert from_file.client_kwargs() == expected
    # Exactly the settings asked for, under kafka-python's names.
    assert expected["security_protocol"] == protocol
    assert expected.get("ssl_cafile") == (pki.ca if tls and ca else None)
    assert expected.get("ssl_certfile") == (pki.client_bundle if tls and mutual else None)
    assert expected.get("ssl_check_hostname", True) == (check_hostname or not tls)
    assert expected.get("sasl_plain_password") == (password if sasl else None)
    assert expected.get("sasl_plain_username") == (user if sasl else None)
    assert expected.get("sasl_mechanism") == (mechanism if sasl else None)


def test_a_flag_wins_over_the_file(pki, tmp_path):
    path = write(tmp_path, "security.protocol=SSL\nssl.truststore.location=" + pki.other_ca + "\n"
                 "ssl.endpoint.identification.algorithm=\n")
    chosen = parse(["--kafka-config", path, "--ssl-cafile", pki.ca, "--ssl-check-hostname"])
    assert chosen.client_kwargs() == {"security_protocol": "SSL", "ssl_cafile": pki.ca,
                                      "ssl_check_hostname": True}


def test_confluent_style_file_with_single_quotes_and_tuning_keys(tmp_path):
    path = write(tmp_path, """\
bootstrap.servers=pkc-123.europe-west1.gcp.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule   required \\
    username='KEY123'   password='s3cr"et';
sasl.mechanism=PLAIN
client.dns.lookup=use_all_dns_ips
session.timeout.ms=45000
acks=all
""")
    assert parse(["--kafka-config", path]).client_kwargs() == {
        "security_protocol": "SASL_SSL", "ssl_check_hostname": True, "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "KEY123", "sasl_plain_password": 's3cr"et',
        "client_dns_lookup": "use_all_dns_ips"}


# -- every setting reaches each client -------------------------------------------------------------


def _full_settings(pki):
    return SecuritySettings(security_protocol="SASL_SSL", ssl_cafile=pki.ca,
                            ssl_certfile=pki.client_cert, ssl_keyfile=pki.client_key_encrypted,
                            ssl_key_password=pki.key_password, ssl_check_hostname=False,
                            sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
                            sasl_password="pa ss", client_dns_lookup="use_all_dns_ips")


@pytest.mark.parametrize("mechanism", security.MECHANISMS)
def test_every_setting_reaches_the_consumer_and_the_producer(pki, mechanism):
    from kafka import KafkaConsumer, KafkaProducer

    chosen = _full_settings(pki)
    chosen = SecuritySettings(**{**chosen.__dict__, "sasl_mechanism": mechanism})
    kwargs = chosen.client_kwargs()
    assert kwargs == {
        "security_protocol": "SASL_SSL", "ssl_check_hostname": False, "ssl_cafile": pki.ca,
        "ssl_certfile": pki.client_cert, "ssl_keyfile": pki.client_key_encrypted,
        "ssl_password": pki.key_password, "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice", "sasl_plain_password": "pa ss",
        "client_dns_lookup": "use_all_dns_ips"}
    # With an api_version the clients do not connect in their constructors.
    consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:9", api_version=(3, 0), **kwargs)
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:9", api_version=(3, 0), **kwargs)
    try:
        for client in (consumer, producer):
            assert {k: client.config[k] for k in kwargs} == kwargs
    finally:
        consumer.close()
        producer.close(timeout=1)


def test_every_setting_is_one_the_admin_client_takes(pki):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    kwargs = _full_settings(pki).client_kwargs()
    for client in (KafkaAdminClient, KafkaConsumer, KafkaProducer):
        assert set(kwargs) <= set(client.DEFAULT_CONFIG), client.__name__


def test_the_probe_builds_the_tls_context_kafka_python_builds(pki):
    from kafka.net.transport import KafkaSSLTransport

    chosen = _full_settings(pki)
    ours = chosen.ssl_context()
    config = {k: None for k in KafkaSSLTransport.DEFAULT_CONFIG}
    config.update({k: v for k, v in chosen.client_kwargs().items() if k.startswith("ssl_")})
    theirs = KafkaSSLTransport._build_ssl_context(config)
    for attribute in ("check_hostname", "verify_mode", "minimum_version", "maximum_version",
                      "verify_flags", "options"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert ours.cert_store_stats() == theirs.cert_store_stats()
    assert ours.get_ca_certs() == theirs.get_ca_certs()


# -- passwords ------------------------------------------------------------------------------------


def test_the_password_never_comes_from_the_command_line(capsys):
    with pytest.raises(SystemExit):
        parse(["--security-protocol", "SASL_PLAINTEXT", "--sasl-password", "hunter2"])
    err = capsys.readouterr().err
    assert security.PASSWORD_ENV in err and "--sasl-password-file" in err


def test_the_password_comes_from_the_environment_or_a_file(tmp_path):
    base = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
            "--sasl-username", "alice"]
    from_env = parse(base, {security.PASSWORD_ENV: "from env"})
    assert from_env.client_kwargs()["sasl_plain_password"] == "from env"
    path = write(tmp_path, "from file\nsecond line ignored\n", "password")
    assert parse(base + ["--sasl-password-file", path]).sasl_password == "from file"
    with pytest.raises(SecurityError, match="given twice"):
        parse(base + ["--sasl-password-file", path], {security.PASSWORD_ENV: "x"})
    with pytest.raises(SecurityError, match=f"password of 'alice'.*{security.PASSWORD_ENV}"):
        parse(base)
    assert "from env" not in repr(from_env) and "from env" not in from_env.describe()


# -- clear one-line errors -----------------------------------------------------------------------

ERRORS = [
    ("security.protocol=TLS\n", "must be one of PLAINTEXT, SSL"),
    ("security.protocl=SSL\n", r"unknown key 'security.protocl' \(did you mean "
     r"security.protocol\?\)"),
    ("fetch.max.bytes=1\n", "unknown key 'fetch.max.bytes' \\(advsvm reads security.protocol"),
    ("ssl.truststore.certificates=-----BEGIN...\n", "ssl.truststore.certificates is not supported"),
    ("sasl.username=alice\n", r"librdkafka's\); use sasl.jaas.config"),
    ("security.protocol=SSL\nssl.truststore.location={jks}\n", "not PEM.*convert it to PEM"),
    ("security.protocol=SSL\nssl.truststore.location={ca}\nssl.truststore.type=JKS\n",
     "is JKS; convert it to PEM.*keytool"),
    ("security.protocol=SSL\nssl.truststore.location={ca}\nssl.truststore.password=changeit\n",
     "ssl.truststore.password is the password of a JKS or PKCS12 store"),
    ("security.protocol=SSL\nssl.keystore.location={ca}\nssl.keystore.type=PKCS12\n",
     "is PKCS12; convert it to PEM, e.g. `openssl pkcs12"),
    ("security.protocol=SSL\nssl.endpoint.identification.algorithm=ldap\n", "must be https"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "must be one of PLAIN"),
    ("security.protocol=SASL_SSL\nsasl.jaas.config=x.PlainLoginModule required username=a "
     "password=b;\n", "sasl.mechanism is not"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config="
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=a password=b;\n",
     "takes the PlainLoginModule"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
     "x.ScramLoginModule required username=a password=b tokenauth=true;\n",
     "option 'tokenauth' is not supported"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=username=a\n",
     "is not `LoginModule required"),
    ("sasl.mechanism=PLAIN\n", "sasl.mechanism in .* is a setting of SASL_PLAINTEXT or "
     "SASL_SSL, but the security protocol is PLAINTEXT"),
    ("ssl.truststore.location={ca}\n", "is a setting of SSL or SASL_SSL, but the security "
     "protocol is PLAINTEXT"),
    ("security.protocol=SSL\nssl.truststore.location={not_pem}\n", "not PEM"),
    ("security.protocol=SSL\nssl.truststore.location={missing}\n", "no such file"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "needs a user name"),
    # Paths no file can have: a NUL, a lone surrogate (open() raised ValueError on them).
    ("security.protocol=SSL\nssl.truststore.location=a\\u0000b.pem\n", "no such file"),
    ("security.protocol=SSL\nssl.keystore.location=\\uD800\n", "no such file"),
]


_KEYS = ["security.protocol", "ssl.truststore.location", "ssl.truststore.type",
         "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password",
         "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
         "client.dns.lookup", "bootstrap.servers", "acks"]
_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["SSL", "SASL_SSL", "SASL_PLAINTEXT", "PLAINTEXT", "PEM", "JKS", "https", "",
                     "PLAIN", "SCRAM-SHA-256", "/", "/nonexistent", "/dev/null", "a\\u0000b",
                     "x\\uD800y", 'x.PlainLoginModule required username="u" password="p";',
                     'x.ScramLoginModule required username="u\\u0000" password="\\uD800";']))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(pairs=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), max_size=6),
       tail=st.text(max_size=20), build=st.booleans())
def test_any_properties_text_gives_settings_or_a_security_error(pairs, tail, build):
    text = "\n".join(f"{key}={value}" for key, value in pairs) + tail
    try:
        security.settings_from_properties(text, "client.properties", build=build)
    except SecurityError as error:
        assert "\n" not in str(error)


@pytest.mark.parametrize("text, message", ERRORS)
def test_a_bad_properties_file_is_one_clear_line(pki, tmp_path, text, message):
    text = text.format(jks=pki.jks, ca=pki.ca, not_pem=pki.not_pem,
                       missing=str(tmp_path / "missing.pem"))
    path = write(tmp_path, text)
    with pytest.raises(SecurityError, match=message) as error:
        parse(["--kafka-config", path])
    assert "\n" not in str(error.value)


def test_bad_flags_are_one_clear_line(pki, tmp_path):
    big = tmp_path / "big.properties"  # (a wrong path: a log, say)
    big.write_text("# " + "x" * security.MAX_SETTINGS_FILE_BYTES + "\n")
    big = str(big)
    cases = [
        (["--ssl-cafile", pki.ca], "--ssl-cafile is a setting of SSL or SASL_SSL, but the "
         "security protocol is PLAINTEXT"),
        (["--security-protocol", "SSL", "--ssl-keyfile", pki.client_key], "needs a client cert"),
        (["--security-protocol", "SSL", "--ssl-cafile", pki.not_pem], "holds no PEM certificate"),
        (["--security-protocol", "SSL", "--ssl-cafile", pki.jks], "JKS or PKCS12 trust store"),
        (["--security-protocol", "SSL", "--ssl-cafile", str(tmp_path / "nope.pem")],
         "--ssl-cafile .*nope.pem: no such file"),
        (["--security-protocol", "SSL", "--ssl-certfile", pki.client_cert, "--ssl-keyfile",
          pki.untrusted_client_key], "does not belong to the client certificate"),
        (["--security-protocol", "SSL", "--ssl-certfile", pki.client_cert, "--ssl-keyfile",
          pki.client_key_encrypted], f"encrypted: set {security.KEY_PASSWORD_ENV}"),
        (["--security-protocol", "SASL_SSL", "--sasl-username", "a"], "needs --sasl-mechanism"),
        (["--kafka-config", str(tmp_path / "none.properties")], "--kafka-config .*no such file"),
        (["--kafka-config", big], "--kafka-config .*big.properties: larger than"),
        (["--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN", "--sasl-username", "a",
          "--sasl-password-file", big], "--sasl-password-file .*big.properties: larger than"),
    ]
    for argv, message in cases:
        with pytest.raises(SecurityError, match=message) as error:
            parse(argv)
        assert "\n" not in str(error.value)
    wrong_password = {security.KEY_PASSWORD_ENV: "not it"}
    with pytest.raises(SecurityError, match="wrong password for the client key"):
        parse(["--security-protocol", "SSL", "--ssl-certfile", pki.client_cert,
               "--ssl-keyfile", pki.client_key_encrypted], wrong_password)
    right = parse(["--security-protocol", "SSL", "--ssl-certfile", pki.client_cert,
                   "--ssl-keyfile", pki.client_key_encrypted],
                  {security.KEY_PASSWORD_ENV: pki.key_password})
    assert right.client_kwargs()["ssl_password"] == pki.key_password


def test_nothing_set_is_plaintext():
    assert parse([]).client_kwargs() == DEFAULTS
    assert SecuritySettings() == parse([])


def test_the_deployment_page_example_file_reads_as_it_says():
    import re

    page = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                        "deployment.md")
    with open(page, encoding="utf-8") as f:
        (text,) = re.findall(r"```properties\n(.*?)```", f.read(), re.S)
    fields = security.settings_from_properties(text, "client.properties", build=False)
    fields.pop("sources")
    assert fields == {"security_protocol": "SASL_SSL", "ssl_cafile": "/etc/advsvm/ca.pem",
                      "ssl_check_hostname": True, "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_username": "advsvm", "sasl_password": "change me",
                      "client_dns_lookup": "use_all_dns_ips"}


@pytest.mark.parametrize("mechanism", security.MECHANISMS)
@pytest.mark.parametrize("user, password, named", [
    ("al\udcffice", "secret", "--sasl-username"),  # a non-UTF-8 byte of argv or the environment
    ("alice", "se\udcffcret", security.PASSWORD_ENV),
])
def test_sasl_credentials_the_client_cannot_encode_are_refused_up_front(mechanism, user,
                                                                         password, named):
    """kafka-python encodes them as UTF-8 when it authenticates, after the start-up check (which
    stops at the SASL handshake) has passed: a lone surrogate (what Python makes of a non-UTF-8
    byte) was accepted here and failed only there, inside the client, instead of being a usage
    error (exit status 2) before any connection."""
    with pytest.raises(SecurityError, match=f"{re.escape(named)}.*not UTF-8 text") as error:
        parse(["--security-protocol", "SASL_SSL", "--sasl-mechanism", mechanism,
               "--sasl-username", user], {security.PASSWORD_ENV: password})
    assert "\n" not in str(error.value) and "se\udcffcret" not in str(error.value)


def test_a_nul_in_plain_credentials_is_refused_up_front():
    """PLAIN sends user and password separated by NUL bytes (RFC 4616): one inside them would
    authenticate as someone else, or fail as a wrong password."""
    for user, password in [("ali\x00ce", "secret"), ("alice", "sec\x00ret")]:
        with pytest.raises(SecurityError, match="NUL") as error:
            parse(["--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN",
                   "--sasl-username", user], {security.PASSWORD_ENV: password})
        assert "sec\x00ret" not in str(error.value)


@pytest.mark.parametrize("password, problem", [
    ("pa\udcffss", "not UTF-8 text"),  # a non-UTF-8 byte of the environment
    ("p" * 1025, "longer than 1024 bytes"),  # what Python's ssl module takes
])
def test_a_key_password_ssl_cannot_take_is_one_line_naming_its_variable(pki, password, problem):
    # Before: the ssl module's own words ("'utf-8' codec can't encode character '\udcff'...",
    # "password cannot be longer than 1024 bytes"), naming neither the variable nor the key.
    with pytest.raises(SecurityError, match=f"{security.KEY_PASSWORD_ENV}.*{problem}") as error:
        parse(["--security-protocol", "SSL", "--ssl-certfile", pki.client_cert,
               "--ssl-keyfile", pki.client_key_encrypted], {security.KEY_PASSWORD_ENV: password})
    assert "\n" not in str(error.value) and password not in str(error.value)
