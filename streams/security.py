"""How the service's Kafka clients prove who they are and whom they talk to: TLS and SASL.

The settings are the ones every Kafka client has (`security.protocol`, a CA file for TLS, a
client certificate for mutual TLS, a SASL mechanism with a user name and password), given
either as command-line flags or as the `client.properties` file Kafka's own tools read. Both
end up as one `SecuritySettings`, whose `client_kwargs()` is passed to every KafkaConsumer,
KafkaProducer and KafkaAdminClient the service creates, so that all of them connect alike.

The password never goes on the command line (where `ps` shows it): it comes from the
environment (`ADVSVM_SASL_PASSWORD`), from a file (`--sasl-password-file`), or from the
properties file's `sasl.jaas.config`.

Only PEM files can be read by the Python client: a Java trust store or key store (JKS,
PKCS12) is refused with the command that converts it.

A flag wins over the same setting in the properties file. Every file is read, and the TLS context
built, when the settings are made: a missing file, a CA file with no certificate or a key that does
not match its certificate is a one-line `SecurityError` before anything connects. Whether the broker
then accepts the settings is `river_advsvm.streams.connection_check`'s job.

Examples
--------

>>> from river_advsvm.streams.security import SecuritySettings
>>> SecuritySettings().client_kwargs()
{'security_protocol': 'PLAINTEXT'}
>>> settings = SecuritySettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
...                             sasl_username="alice", sasl_password="s3cret")
>>> settings
SecuritySettings(SASL_PLAINTEXT, PLAIN as 'alice')
>>> settings.client_kwargs()["sasl_plain_username"]
'alice'
>>> text = '''
... security.protocol=SASL_PLAINTEXT
... sasl.mechanism=SCRAM-SHA-512
... sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\\
...     username="alice" password="s3cret";
... '''
>>> from_properties = settings_from_properties(read_properties(text), "client.properties")
>>> from_properties.sasl_mechanism, from_properties.sasl_username
('SCRAM-SHA-512', 'alice')

"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import ssl

from river_advsvm import inputs

__all__ = ["CLIENT_KEYS", "MECHANISMS", "PASSWORD_ENV", "PROTOCOLS", "SecurityError",
           "SecuritySettings", "add_arguments", "from_args", "read_properties",
           "settings_from_properties"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD_ENV = "ADVSVM_SASL_PASSWORD"
KEY_PASSWORD_ENV = "ADVSVM_SSL_KEY_PASSWORD"
#: The kafka-python settings `SecuritySettings.client_kwargs` may set.
CLIENT_KEYS = frozenset({"security_protocol", "ssl_check_hostname", "ssl_cafile", "ssl_certfile",
                         "ssl_keyfile", "ssl_password", "sasl_mechanism", "sasl_plain_username",
                         "sasl_plain_password", "client_dns_lookup"})

_CONVERT_TRUST = ("convert it to PEM, e.g. `keytool -exportcert -rfc -keystore FILE -alias "
                  "ALIAS > ca.pem` (JKS) or `openssl pkcs12 -in FILE -nokeys -out ca.pem` (PKCS12)")
_CONVERT_KEY = ("convert it to PEM, e.g. `openssl pkcs12 -in FILE -nodes -out client.pem` "
                "(for JKS, first `keytool -importkeystore -srckeystore FILE -deststoretype "
                "PKCS12 -destkeystore FILE.p12`)")


class SecurityError(ValueError):
    """The security settings are unusable; the message is one line for the user."""


@dataclasses.dataclass(frozen=True, repr=False)
class SecuritySettings:
    """The TLS and SASL settings of every Kafka client of the service.

    Parameters
    ----------
    security_protocol
        PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL inside TLS).
    ssl_cafile
        PEM file of the CA(s) that signed the brokers' certificates; None trusts the system's
        CAs (as a managed Kafka with a public certificate needs).
    ssl_certfile, ssl_keyfile
        The client's certificate and key for mutual TLS (PEM). The key may sit in the
        certificate file, then `ssl_keyfile` is None.
    ssl_key_password
        Password of an encrypted client key.
    ssl_check_hostname
        Check that the broker's certificate names the host the client connected to.
    sasl_mechanism, sasl_username, sasl_password
        PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, and the credentials.
    client_dns_lookup
        Kafka's `client.dns.lookup` (`use_all_dns_ips` or
        `resolve_canonical_bootstrap_servers_only`); None keeps the client's default.
    sources
        Where each setting came from (a flag, or a key of a file), for error messages.

    """

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    client_dns_lookup: str | None = None
    sources: dict = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.security_protocol not in PROTOCOLS:
            raise SecurityError(f"{self._name('security_protocol')} must be one of "
                                f"{', '.join(PROTOCOLS)}, not {self.security_protocol!r}")
        tls_only = ["ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_key_password"]
        if not self.ssl_check_hostname:
            tls_only.append("ssl_check_hostname")
        self._only_with(self.tls, "SSL or SASL_SSL", tls_only)
        self._only_with(self.sasl, "SASL_PLAINTEXT or SASL_SSL",
                        ["sasl_mechanism", "sasl_username", "sasl_password"])
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise SecurityError(f"{self._name('ssl_keyfile')} needs a client certificate "
                                f"({self._name('ssl_certfile')})")
        if self.ssl_key_password is not None and self.ssl_certfile is None:
            raise SecurityError(f"{self._name('ssl_key_password')} is the password of a client "
                                f"key: give the key too ({self._name('ssl_certfile')})")
        if self.sasl:
            if self.sasl_mechanism is None:
                raise SecurityError(f"{self.security_protocol} needs "
                                    f"{self._name('sasl_mechanism')} ({', '.join(MECHANISMS)})")
            if self.sasl_mechanism not in MECHANISMS:
                raise SecurityError(f"{self._name('sasl_mechanism')} must be one of "
                                    f"{', '.join(MECHANISMS)}, not {self.sasl_mechanism!r}")
            if not self.sasl_username:
                raise SecurityError(f"SASL {self.sasl_mechanism} needs a user name "
                                    f"({self._name('sasl_username')})")
            if not self.sasl_password:
                raise SecurityError(f"SASL {self.sasl_mechanism} needs the password of "
                                    f"{self.sasl_username!r}: set {PASSWORD_ENV} or give "
                                    "--sasl-password-file")
            # The client encodes both as UTF-8 in its connection thread, where a failure is
            # only a connection that never completes (the service waited for a broker).
            for field in ("sasl_username", "sasl_password"):
                value = getattr(self, field)
                shown = f" {value!r}" if field == "sasl_username" else ""
                what = f"the SASL {field[5:].replace('name', ' name')}{shown} ({self._name(field)})"
                if not inputs.is_utf8(value):
                    raise SecurityError(f"{what} is not UTF-8 text (a non-UTF-8 byte of the "
                                        "command line, the environment or a file?)")
                if self.sasl_mechanism == "PLAIN" and "\0" in value:
                    raise SecurityError(f"{what} holds a NUL character, which PLAIN uses to "
                                        "separate the user name from the password")
        lookups = (None, "use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
        if self.client_dns_lookup not in lookups:
            raise SecurityError(f"{self._name('client_dns_lookup')} must be use_all_dns_ips or "
                                f"resolve_canonical_bootstrap_servers_only, not "
                                f"{self.client_dns_lookup!r}")

    def _name(self, field: str) -> str:
        """How the user spelled a setting: the flag, or the key of the file it came from."""
        return self.sources.get(field) or _NAMES.get(field) or "--" + field.replace("_", "-")

    def _only_with(self, allowed: bool, protocols: str, fields: list[str]) -> None:
        given = [f for f in fields if getattr(self, f) not in (None, True)]
        if given and not allowed:
            raise SecurityError(f"{self._name(given[0])} is a setting of {protocols}, but the "
                                f"security protocol is {self.security_protocol}")

    @property
    def tls(self) -> bool:
        """True when connections are encrypted (SSL or SASL_SSL)."""
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """True when clients authenticate with SASL (SASL_PLAINTEXT or SASL_SSL)."""
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def client_kwargs(self) -> dict:
        """Keyword arguments of KafkaConsumer, KafkaProducer and KafkaAdminClient."""
        kwargs = {"security_protocol": self.security_protocol}
        if self.tls:
            kwargs["ssl_check_hostname"] = self.ssl_check_hostname
            names = [("ssl_cafile", "ssl_cafile"), ("ssl_certfile", "ssl_certfile"),
                     ("ssl_keyfile", "ssl_keyfile"), ("ssl_key_password", "ssl_password")]
            for field, key in names:
                if getattr(self, field) is not None:
                    kwargs[key] = getattr(self, field)
        if self.sasl:
            kwargs.update(sasl_mechanism=self.sasl_mechanism,
                          sasl_plain_username=self.sasl_username,
                          sasl_plain_password=self.sasl_password)
        if self.client_dns_lookup is not None:
            kwargs["client_dns_lookup"] = self.client_dns_lookup
        return kwargs

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context, built by the rules kafka-python follows for the same
        settings (TLS 1.2 or newer, the CA file or else the system's CAs, the client
        certificate); `SecurityError` if a file cannot be used."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_cafile:
            _readable(self.ssl_cafile, self._name("ssl_cafile"))
            try:
                context.load_verify_locations(self.ssl_cafile)
            except ssl.SSLError:
                raise SecurityError(f"{self._name('ssl_cafile')} {self.ssl_cafile} holds no PEM "
                                    f"certificate; if it is a JKS or PKCS12 trust store, "
                                    f"{_CONVERT_TRUST}") from None
        else:
            context.load_default_certs()
        if self.ssl_certfile:
            _readable(self.ssl_certfile, self._name("ssl_certfile"))
            if self.ssl_keyfile:
                _readable(self.ssl_keyfile, self._name("ssl_keyfile"))
            # What the ssl module refuses of a password in its own words, naming neither the
            # setting nor the key.
            what = f"the password of the client key ({self._name('ssl_key_password')})"
            password = self.ssl_key_password or ""
            if not inputs.is_utf8(password):
                raise SecurityError(f"{what} is not UTF-8 text (a non-UTF-8 byte of the "
                                    "environment or of a file?)")
            if len(password.encode("utf-8")) > 1024:
                raise SecurityError(f"{what} is longer than 1024 bytes, more than Python's ssl "
                                    "module takes")
            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile,
                                        password=self.ssl_key_password or "")
            except ssl.SSLError as error:
                raise SecurityError(self._key_problem(error)) from None
        return context

    def _key_problem(self, error: ssl.SSLError) -> str:
        files = self.ssl_certfile + (f" and {self.ssl_keyfile}" if self.ssl_keyfile else "")
        reason = (error.reason or "").upper()
        if "KEY_VALUES_MISMATCH" in reason:
            return f"the client key does not belong to the client certificate ({files})"
        if _encrypted_key(self.ssl_keyfile or self.ssl_certfile):
            if self.ssl_key_password is None:
                return (f"the client key in {files} is encrypted: set {KEY_PASSWORD_ENV} "
                        "(or ssl.key.password in the properties file)")
            return f"wrong password for the client key in {files}"
        return (f"cannot use the client certificate {files} ({error.reason or error}); it must "
                f"be PEM; a JKS or PKCS12 key store: {_CONVERT_KEY}")

    def describe(self) -> str:
        """One line for the log, without secrets."""
        parts = [self.security_protocol]
        if self.tls:
            parts.append(f"CA {self.ssl_cafile or 'from the system'}")
            if self.ssl_certfile:
                parts.append(f"client certificate {self.ssl_certfile}")
            if not self.ssl_check_hostname:
                parts.append("host names not checked")
        if self.sasl:
            parts.append(f"{self.sasl_mechanism} as {self.sasl_username!r}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"SecuritySettings({self.describe()})"


def _encrypted_key(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20)
    except (OSError, ValueError):  # ValueError: a NUL or a lone surrogate in the path
        return False
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text


def _readable(path: str, name: str) -> None:
    if not os.path.isfile(path):
        raise SecurityError(f"{name} {path}: no such file")
    if not os.access(path, os.R_OK):
        raise SecurityError(f"{name} {path}: not readable by this user")


# -- command line ----------------------------------------------------------------------------------

#: How a user gives the settings that have no flag of their own.
_NAMES = {"ssl_key_password": KEY_PASSWORD_ENV, "sasl_password": PASSWORD_ENV,
          "client_dns_lookup": "client.dns.lookup"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the security flags to `parser`, in a group of their own."""
    group = parser.add_argument_group(
        "Kafka security (TLS, SASL)",
        f"Flags win over the same settings in --kafka-config. The SASL password is read from "
        f"the environment variable {PASSWORD_ENV} or from --sasl-password-file, never from the "
        f"command line; an encrypted client key's password from {KEY_PASSWORD_ENV}.")
    group.add_argument("--kafka-config", metavar="FILE",
                       help="a client.properties file as Kafka's own tools take it "
                       "(security.protocol, ssl.truststore.location, sasl.mechanism, "
                       "sasl.jaas.config, ...)")
    group.add_argument("--security-protocol", choices=PROTOCOLS, metavar="PROTOCOL",
                       help=f"{', '.join(PROTOCOLS[:-1])} or {PROTOCOLS[-1]} (default "
                       "PLAINTEXT, or what --kafka-config says)")
    group.add_argument("--ssl-cafile", metavar="PEM",
                       help="CA certificate(s) that signed the brokers' certificates (default: "
                       "the system's CAs)")
    group.add_argument("--ssl-certfile", metavar="PEM",
                       help="client certificate for mutual TLS (may hold the key too)")
    group.add_argument("--ssl-keyfile", metavar="PEM", help="client private key")
    group.add_argument("--ssl-check-hostname", action=argparse.BooleanOptionalAction,
                       default=None, help="check that the broker's certificate names the host "
                       "connected to (default: check)")
    group.add_argument("--sasl-mechanism", choices=MECHANISMS,
                       help="the SASL mechanism (with SASL_PLAINTEXT or SASL_SSL)")
    group.add_argument("--sasl-username", metavar="USER", help="the SASL user")
    group.add_argument("--sasl-password-file", metavar="FILE",
                       help=f"file whose first line is the SASL password (else {PASSWORD_ENV})")
    group.add_argument("--sasl-password", action=_RefusePassword, help=argparse.SUPPRESS)


class _RefusePassword(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"the SASL password is not taken on the command line (any user can read it "
                     f"there): set {PASSWORD_ENV} or give --sasl-password-file")


def from_args(args: argparse.Namespace, environ=None) -> SecuritySettings:
    """The settings from parsed flags, over the properties file if `--kafka-config` names one;
    `SecurityError` (one line) if they are incomplete, inconsistent or name unusable files."""
    environ = os.environ if environ is None else environ
    values: dict = {}
    if args.kafka_config:
        values = settings_from_properties(_read_file(args.kafka_config, "--kafka-config"),
                                          args.kafka_config, build=False)
    sources = values.pop("sources", {})
    flags = {
        "security_protocol": args.security_protocol,
        "ssl_cafile": args.ssl_cafile,
        "ssl_certfile": args.ssl_certfile,
        "ssl_keyfile": args.ssl_keyfile,
        "ssl_check_hostname": args.ssl_check_hostname,
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_username": args.sasl_username,
    }
    for field, value in flags.items():
        if value is not None:
            values[field] = value
            sources.pop(field, None)
    password = _password(args, environ)
    if password is not None:
        values["sasl_password"] = password
        sources["sasl_password"] = ("--sasl-password-file" if args.sasl_password_file
                                    else PASSWORD_ENV)
    if environ.get(KEY_PASSWORD_ENV):
        values["ssl_key_password"] = environ[KEY_PASSWORD_ENV]
        sources["ssl_key_password"] = KEY_PASSWORD_ENV
    settings = SecuritySettings(**values, sources=sources)
    if settings.tls:
        settings.ssl_context()  # every file read and checked now, not at the first connection
    return settings


def _password(args: argparse.Namespace, environ) -> str | None:
    from_env = environ.get(PASSWORD_ENV)
    if args.sasl_password_file:
        if from_env:
            raise SecurityError(f"the SASL password is given twice ({PASSWORD_ENV} and "
                                "--sasl-password-file): keep one")
        text = _read_file(args.sasl_password_file, "--sasl-password-file")
        lines = text.splitlines()
        if not lines or not lines[0]:
            raise SecurityError(f"--sasl-password-file {args.sasl_password_file}: the first "
                                "line (the password) is empty")
        return lines[0]
    return from_env or None


#: The most bytes a settings file (`--kafka-config`, `--sasl-password-file`) may hold: far
#: beyond any client.properties, and a wrong path (a log, a disk image) is not read whole.
MAX_SETTINGS_FILE_BYTES = 1 << 20


def _read_file(path: str, name: str) -> str:
    _readable(path, name)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_SETTINGS_FILE_BYTES + 1)
    except UnicodeDecodeError:
        raise SecurityError(f"{name} {path}: not a text file (UTF-8)") from None
    if len(text) > MAX_SETTINGS_FILE_BYTES:
        raise SecurityError(f"{name} {path}: larger than {MAX_SETTINGS_FILE_BYTES} bytes, not a "
                            "settings file")
    return text


# -- client.properties -----------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> dict[str, str]:
    """Parse a Java `.properties` text as Kafka's tools read it: `key=value`, `key: value` or
    `key value`; `#` and `!` comments; a line ending with `\\` continues on the next one;
    backslash escapes (`\\t`, `\\n`, `\\uXXXX`, `\\=`, ...). A later key wins."""
    properties: dict[str, str] = {}
    lines = iter(re.split(r"\r\n|\r|\n", text))
    for line in lines:
        line = line.lstrip(" \t\f")
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip(" \t\f")
        key, rest = _split_key(line)
        properties[_unescape(key)] = _unescape(rest)
    return properties


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i >= len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


#: Keys that are librdkafka's (or another client's): the Kafka name the file should use.
_OTHER_CLIENTS = {
    "sasl.username": "sasl.jaas.config (username=...)",
    "sasl.password": "sasl.jaas.config (password=...)",
    "sasl.mechanisms": "sasl.mechanism",
    "ssl.ca.location": "ssl.truststore.location with ssl.truststore.type=PEM",
    "ssl.certificate.location": "ssl.keystore.location with ssl.keystore.type=PEM",
    "ssl.key.location": "ssl.keystore.location with ssl.keystore.type=PEM",
    "enable.ssl.certificate.verification": "ssl.endpoint.identification.algorithm",
}
#: Kafka client keys that are not about security and that advsvm sets itself.
_IGNORED = {"bootstrap.servers", "client.id", "group.id", "acks", "linger.ms", "retries",
            "request.timeout.ms", "session.timeout.ms", "heartbeat.interval.ms",
            "max.poll.records", "auto.offset.reset", "enable.auto.commit", "isolation.level",
            "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
            "delivery.timeout.ms", "retry.backoff.ms", "reconnect.backoff.ms",
            "reconnect.backoff.max.ms", "connections.max.idle.ms", "metadata.max.age.ms"}
#: Known, and refused with the conversion command by `_store`.
_STORE_PASSWORDS = {"ssl.truststore.password", "ssl.keystore.password"}
_SECURITY_KEYS = ["security.protocol", "ssl.truststore.location", "ssl.truststore.type",
                  "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password",
                  "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
                  "client.dns.lookup"]


def settings_from_properties(properties: dict[str, str] | str, where: str, build: bool = True):
    """The settings a Kafka `client.properties` describes (`properties` parsed, or its text).

    Keys that map: security.protocol, ssl.truststore.location/.type (PEM),
    ssl.keystore.location/.type (PEM: certificate and key in one file), ssl.key.password,
    ssl.endpoint.identification.algorithm (`https` or empty), sasl.mechanism, sasl.jaas.config
    (PlainLoginModule or ScramLoginModule with username and password), client.dns.lookup.
    Client tuning keys that advsvm sets itself (acks, session.timeout.ms, ...) and
    bootstrap.servers are skipped; any other key is a `SecurityError` naming it.
    With `build=False`, returns the fields as a dict (with `sources`) instead of settings.
    """
    if isinstance(properties, str):
        properties = read_properties(properties)
    values: dict = {}
    sources: dict = {}

    def take(field, value, key):
        values[field] = value
        sources[field] = f"{key} in {where}"

    for key, value in properties.items():
        if key in _OTHER_CLIENTS:
            raise SecurityError(f"{where}: {key} is not a Kafka client setting (it is "
                                f"librdkafka's); use {_OTHER_CLIENTS[key]}")
        if key not in _SECURITY_KEYS and key not in _IGNORED and key not in _STORE_PASSWORDS:
            close = difflib.get_close_matches(key, _SECURITY_KEYS, n=1, cutoff=0.85)
            if close:
                raise SecurityError(f"{where}: unknown key {key!r} (did you mean {close[0]}?)")
            if key.startswith(("ssl.", "sasl.", "security.")):
                raise SecurityError(f"{where}: {key} is not supported; the security keys advsvm "
                                    f"reads are {', '.join(_SECURITY_KEYS)}")
            raise SecurityError(f"{where}: unknown key {key!r} (advsvm reads "
                                f"{', '.join(_SECURITY_KEYS)})")
    p = properties
    if "security.protocol" in p:
        take("security_protocol", p["security.protocol"].strip().upper(), "security.protocol")
    _store(p, "truststore", where)
    if p.get("ssl.truststore.location"):
        take("ssl_cafile", p["ssl.truststore.location"], "ssl.truststore.location")
    _store(p, "keystore", where)
    if p.get("ssl.keystore.location"):
        take("ssl_certfile", p["ssl.keystore.location"], "ssl.keystore.location")
    if p.get("ssl.key.password"):
        take("ssl_key_password", p["ssl.key.password"], "ssl.key.password")
    if "ssl.endpoint.identification.algorithm" in p:
        algorithm = p["ssl.endpoint.identification.algorithm"].strip()
        if algorithm.lower() not in ("https", ""):
            raise SecurityError(f"{where}: ssl.endpoint.identification.algorithm must be https "
                                f"(check host names) or empty (do not), not {algorithm!r}")
        take("ssl_check_hostname", algorithm.lower() == "https",
             "ssl.endpoint.identification.algorithm")
    if "sasl.mechanism" in p:
        take("sasl_mechanism", p["sasl.mechanism"].strip().upper(), "sasl.mechanism")
    if p.get("sasl.jaas.config"):
        module, options = _parse_jaas(p["sasl.jaas.config"], where)
        mechanism = values.get("sasl_mechanism")
        expected = "PlainLoginModule" if mechanism == "PLAIN" else "ScramLoginModule"
        if mechanism is None:
            raise SecurityError(f"{where}: sasl.jaas.config is set but sasl.mechanism is not "
                                f"(Kafka's default, GSSAPI, is not supported): set it to one of "
                                f"{', '.join(MECHANISMS)}")
        if mechanism in MECHANISMS and module.rsplit(".", 1)[-1] != expected:
            raise SecurityError(f"{where}: sasl.mechanism={mechanism} takes the {expected} in "
                                f"sasl.jaas.config, not {module}")
        if "username" in options:
            take("sasl_username", options["username"], "sasl.jaas.config")
        if "password" in options:
            take("sasl_password", options["password"], "sasl.jaas.config")
    if "client.dns.lookup" in p:
        take("client_dns_lookup", p["client.dns.lookup"].strip(), "client.dns.lookup")
    if not build:
        return {**values, "sources": sources}
    settings = SecuritySettings(**values, sources=sources)
    if settings.tls:
        settings.ssl_context()
    return settings


def _store(properties: dict, kind: str, where: str) -> None:
    """Refuse what the Python client cannot read: a JKS or PKCS12 trust or key store."""
    location = properties.get(f"ssl.{kind}.location")
    store_type = properties.get(f"ssl.{kind}.type", "").strip().upper()
    convert = _CONVERT_TRUST if kind == "truststore" else _CONVERT_KEY
    if store_type not in ("", "PEM", "JKS", "PKCS12"):
        raise SecurityError(f"{where}: ssl.{kind}.type must be PEM, not {store_type!r}")
    if properties.get(f"ssl.{kind}.password"):
        raise SecurityError(f"{where}: ssl.{kind}.password is the password of a JKS or PKCS12 "
                            f"store, which the Python client cannot read; {convert}")
    if location is None:
        return
    if store_type in ("JKS", "PKCS12") or (store_type == "" and not _looks_pem(location)):
        what = store_type or "not PEM (Kafka's default type is JKS)"
        raise SecurityError(f"{where}: ssl.{kind}.location {location} is {what}; {convert}")


def _looks_pem(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"-----BEGIN " in f.read(1 << 16)
    except (OSError, ValueError):  # ValueError: a NUL or a lone surrogate in the path
        return True  # the file no path can name is reported when the TLS context is built


_VALUE = r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+)"""  # "...", '...' or bare
_JAAS = re.compile(rf"""\s*(?P<module>[\w.$-]+)\s+(?P<flag>required|requisite|sufficient|optional)
                        (?P<options>(?:\s+[\w.-]+\s*=\s*{_VALUE})*)
                        \s*;\s*$""", re.X | re.S)
_OPTION = re.compile(rf"""([\w.-]+)\s*=\s*({_VALUE})""", re.S)


def _parse_jaas(text: str, where: str) -> tuple[str, dict]:
    """`module flag key=value ...;` -> (module, options); only username and password."""
    match = _JAAS.match(text)
    if match is None:
        raise SecurityError(f"{where}: sasl.jaas.config is not `LoginModule required "
                            f"username=\"...\" password=\"...\";`")
    options = {}
    for key, value in _OPTION.findall(match["options"]):
        if value[:1] in "\"'":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
        options[key] = value
    unknown = sorted(set(options) - {"username", "password"})
    if unknown:
        raise SecurityError(f"{where}: sasl.jaas.config option {unknown[0]!r} is not supported "
                            "(only username and password)")
    return match["module"], options
