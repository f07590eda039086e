"""``kchannel kafka-dev``: a single-node Apache Kafka for development.

The release pinned in ``kafka-pom.xml`` (shipped in this package, the file
``.ci/install`` uses too) is fetched once with ``mvn
dependency:copy-dependencies`` into ``$KCHANNEL_KAFKA_HOME/libs`` (default
``~/.cache/kchannel/kafka-<version>/libs``); a ``libs/.complete`` stamp
holding the pom's SHA-256 marks a complete download, so later starts fetch
nothing.  In ``--dir`` the command keeps everything else: the KRaft storage
(formatted on the first start), example certificates for the SASL_SSL
listener (a throwaway CA and a server certificate for localhost and
127.0.0.1), ``server.properties``, ``client.properties`` (SASL_SSL with
SCRAM-SHA-512 for the first ``--scram-user``) and ``logs/server.log``.

Every start creates (or updates) the SCRAM-SHA-512 users over the PLAINTEXT
listener, logs in once with ``client.properties`` and waits until the group
coordinator answers; only then it prints one line that starts with
``Apache Kafka`` and holds the bootstrap addresses and the path of
``client.properties``.  Ctrl-C or SIGTERM stops the broker (Kafka's
controlled shutdown) and exits 0.
"""
import base64
import contextlib
import ctypes
import datetime
import hashlib
import ipaddress
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kchannel.client import KafkaClient
from kchannel.config import load_properties
from kchannel.errors import KChannelError
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.sasl import scram

NAME = "kafka-dev"
HELP = ("Start a single-node Apache Kafka (KRaft) for development, with a PLAINTEXT and a "
        "SASL_SSL (SCRAM-SHA-512) listener.")

log = logging.getLogger("kchannel.cli.kafka_dev")

POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka-pom.xml")
PLAINTEXT_PORT = 9092
SASL_SSL_PORT = 9093
CONTROLLER_PORT = 9094
DEFAULT_USER = ("alice", "alice-secret")
NODE_ID = 1
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
LOGIN_RETRY_S = 30.0
CERT_DAYS = 365
# A JVM small enough for a laptop or a 2-core CI machine.
JVM_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8")
_COORDINATOR_NOT_READY = {int(Errors.NOT_COORDINATOR), int(Errors.COORDINATOR_NOT_AVAILABLE),
                          int(Errors.COORDINATOR_LOAD_IN_PROGRESS)}
_STARTED = "Kafka Server started"


class CommandError(Exception):
    """A failure this command explains itself (exit status 1)."""


# ------------------------------------------------------------------ the jars
def kafka_version(pom=POM):
    with open(pom, encoding="utf-8") as f:
        m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", f.read())
    return m.group(1)


def kafka_home(pom=POM):
    return os.environ.get("KCHANNEL_KAFKA_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache", "kchannel", f"kafka-{kafka_version(pom)}")


def pom_checksum(pom=POM):
    with open(pom, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def jars_complete(libs, pom=POM):
    """True when ``libs`` holds a complete download of ``pom`` (the stamp
    ``.ci/install`` writes: the pom's SHA-256)."""
    try:
        with open(os.path.join(libs, ".complete"), encoding="ascii") as f:
            return f.read().strip() == pom_checksum(pom)
    except OSError:
        return False


def java_binary():
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def fetch_kafka(home, pom=POM, out=sys.stderr):
    """Fetch the pinned release into ``home/libs`` unless already complete;
    returns the libs directory.  As ``.ci/install``: into ``libs.partial``
    first, then renamed, so an interrupted download is never taken for a
    complete one."""
    libs = os.path.join(home, "libs")
    if jars_complete(libs, pom):
        return libs
    version = kafka_version(pom)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise CommandError(
            f"Apache Kafka {version} is not in {libs} yet, and fetching it from Maven Central "
            "needs Maven: no `mvn` on PATH. Install Maven (Debian/Ubuntu: apt-get install maven) "
            "and run the command again, or copy a complete libs directory (with its .complete "
            "stamp) from another machine.")
    print(f"fetching Apache Kafka {version} with Maven into {libs} (once)", file=out, flush=True)
    partial = libs + ".partial"
    os.makedirs(home, exist_ok=True)
    shutil.rmtree(partial, ignore_errors=True)
    r = subprocess.run([mvn, "-q", "-B", "-f", pom, "dependency:copy-dependencies",
                        f"-DoutputDirectory={partial}"], stdin=subprocess.DEVNULL,
                       # Maven's output (escape codes even with -q -B) is
                       # progress, not this command's result.
                       stdout=out.fileno() if hasattr(out, "fileno") else None)
    if r.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise CommandError(
            f"Maven could not fetch Apache Kafka {version} (mvn exited with {r.returncode}; "
            "its messages are above). The first start needs network access to Maven Central.")
    with open(os.path.join(partial, ".complete"), "w", encoding="ascii") as f:
        f.write(pom_checksum(pom) + "\n")
    shutil.rmtree(libs, ignore_errors=True)
    os.rename(partial, libs)
    return libs


# --------------------------------------------------------------- certificates
def make_certificates(directory, days=CERT_DAYS):
    """A throwaway CA and a server certificate for localhost and 127.0.0.1
    (ECDSA P-256) in ``directory``: ``ca.pem`` (what clients trust) and
    ``server.keystore.pem`` (PKCS#8 key + chain, Kafka's PEM keystore)."""
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("kchannel-kafka-dev-ca"))
          .issuer_name(name("kchannel-kafka-dev-ca")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"),
                 x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem)
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    keystore = os.path.join(directory, "server.keystore.pem")
    # Written before the CA file: ca.pem's presence says the set is complete.
    fd = os.open(keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem + cert.public_bytes(pem) + ca_pem)
    with open(os.path.join(directory, "ca.pem"), "wb") as f:
        f.write(ca_pem)
    return os.path.join(directory, "ca.pem"), keystore


def _certificates(directory):
    """The certificates in ``directory``, made anew when missing or expiring
    within a day."""
    ca_path = os.path.join(directory, "ca.pem")
    keystore = os.path.join(directory, "server.keystore.pem")
    if os.path.exists(ca_path) and os.path.exists(keystore):
        with open(keystore, "rb") as f:
            leaf = x509.load_pem_x509_certificates(f.read())[0]
        left = leaf.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
        if left > datetime.timedelta(days=1):
            return ca_path, keystore
    return make_certificates(directory)


# ------------------------------------------------------------- configuration
def _jaas_quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_properties(path, props):
    def esc(text):
        return str(text).replace("\\", "\\\\").replace("\n", "\\n")
    with open(path, "w", encoding="utf-8") as f:
        for k, v in props.items():
            f.write(f"{k}={esc(v)}\n")
    return path


def server_properties(directory, ports, advertised_host, keystore, ca_path):
    plaintext, sasl_ssl, controller = ports
    return {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller}",
        "controller.listener.names": "CONTROLLER",
        # Bound to the loopback interface only: a development broker with
        # example certificates is not for other machines.
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SASL_SSL://127.0.0.1:{sasl_ssl},"
                     f"CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://{advertised_host}:{plaintext},"
                                f"SASL_SSL://{advertised_host}:{sasl_ssl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": os.path.join(directory, "data"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
            f"{SCRAM_MODULE} required;",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": keystore,
        "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
        "listener.name.sasl_ssl.ssl.truststore.location": ca_path,
    }


def client_properties(user, password, ca_path):
    """What a client needs for the SASL_SSL listener (no bootstrap.servers,
    as Kafka's ``--command-config`` files)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.jaas.config": f"{SCRAM_MODULE} required username={_jaas_quote(user)} "
                            f"password={_jaas_quote(password)};",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca_path,
    }


_LOG4J = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


# ------------------------------------------------------------------ process
def _die_with_parent():
    """In the JVM child: SIGTERM it if this command dies (even by SIGKILL),
    so no broker outlives it (Linux; elsewhere a no-op)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)      # PR_SET_PDEATHSIG


def _port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _tail(path, lines=40):
    with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])
    return ""


def _java_command(java, libs, log4j, main_class, args):
    return [java, *JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}",
            "-cp", os.path.join(libs, "*"), main_class, *args]


def random_cluster_id():
    """A Kafka cluster id: a base64url UUID without padding (22 chars) that,
    as Kafka's ``Uuid.randomUuid()`` ensures, does not start with "-" (a
    command line would take it for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def _format_storage(java, libs, log4j, config, directory):
    """``kafka-storage.sh format`` on the first start only (the storage then
    holds meta.properties)."""
    if os.path.exists(os.path.join(directory, "data", "meta.properties")):
        return
    cluster_id = random_cluster_id()
    r = subprocess.run(_java_command(java, libs, log4j, "kafka.tools.StorageTool",
                                     ["format", "--config", config, "--cluster-id", cluster_id,
                                      "--ignore-formatted"]),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=START_TIMEOUT_S)
    if r.returncode != 0:
        raise CommandError(f"kafka-storage format failed (exit status {r.returncode}):\n"
                           f"{r.stdout}{r.stderr}")


def _wait_started(proc, log_path, deadline, stopping):
    while True:
        with contextlib.suppress(OSError), open(log_path, encoding="utf-8",
                                                errors="replace") as f:
            if _STARTED in f.read():
                return
        if proc.poll() is not None:
            raise CommandError(f"Apache Kafka exited with status {proc.returncode} while "
                               f"starting; the end of {log_path}:\n{_tail(log_path)}")
        if stopping():
            return
        if time.monotonic() > deadline:
            raise CommandError(f"Apache Kafka did not start within {START_TIMEOUT_S:.0f} s; "
                               f"the end of {log_path}:\n{_tail(log_path)}")
        time.sleep(0.1)


def _retrying(what, deadline, fn, stopping):
    """``fn()`` until it returns without raising a retriable error."""
    while True:
        try:
            return fn()
        except (KChannelError, OSError) as exc:
            if stopping() or time.monotonic() > deadline:
                raise CommandError(f"Apache Kafka started but {what} failed: {exc}") from exc
            log.debug("%s: %s; retrying", what, exc)
            time.sleep(0.2)


def _create_users(bootstrap, users):
    """Upsert SCRAM-SHA-512 credentials as ``kafka-configs.sh --alter
    --add-config`` does (only the salted password goes over the wire)."""
    mech = scram.mechanism_for(SCRAM_MECHANISM)
    upsertions = []
    for user, password in users:
        salt = scram.generate_salt()
        upsertions.append({"name": user, "mechanism": mech.type, "iterations": SCRAM_ITERATIONS,
                           "salt": salt, "salted_password": scram.hi(
                               mech, password.encode("utf-8"), salt, SCRAM_ITERATIONS)})
    with KafkaClient({"bootstrap.servers": bootstrap}).connect() as client:
        body = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                              {"deletions": [], "upsertions": upsertions})
    for result in body.get("results") or []:
        if result.get("error_code"):
            raise CommandError(f"creating SCRAM user {result.get('user')} failed: "
                               f"{result.get('error_message') or result['error_code']}")


def _coordinator_ready(bootstrap):
    """True once the group coordinator answers OffsetFetch.  On a fresh
    broker the first group request creates ``__consumer_offsets``, and until
    its partition is loaded group requests answer NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS; waiting here means a client's first run
    is not that first group use."""
    group = "kchannel-kafka-dev"
    with KafkaClient({"bootstrap.servers": bootstrap}).connect() as client:
        found = client.request(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0},
                               version=3)
        if found["error_code"] in _COORDINATOR_NOT_READY:
            return False
        if found["error_code"]:
            raise CommandError(f"FindCoordinator failed: {found}")
        fetched = client.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None,
                                                       "require_stable": False}, version=7)
        if fetched["error_code"] in _COORDINATOR_NOT_READY:
            return False
        if fetched["error_code"]:
            raise CommandError(f"OffsetFetch failed: {fetched}")
        return True


def _login(bootstrap, client_props):
    configs = dict(load_properties(client_props), **{"bootstrap.servers": bootstrap})
    with KafkaClient(configs).connect() as client:
        client.request(ApiKey.METADATA, {"topics": []})


# ------------------------------------------------------------------ command
def _user(text):
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ValueError(text)
    return user, password


_user.__name__ = "USER:PASSWORD"


def add_arguments(parser):
    parser.add_argument("--dir", default="kafka-dev", metavar="DIR",
                        help="where the broker keeps its storage, certificates, "
                             "server.properties, client.properties and logs (default: "
                             "kafka-dev in the current directory; kept between starts)")
    parser.add_argument("--plaintext-port", type=int, default=PLAINTEXT_PORT, metavar="PORT",
                        help=f"PLAINTEXT listener port (default {PLAINTEXT_PORT})")
    parser.add_argument("--sasl-ssl-port", type=int, default=SASL_SSL_PORT, metavar="PORT",
                        help=f"SASL_SSL listener port, SCRAM-SHA-512 (default {SASL_SSL_PORT})")
    parser.add_argument("--controller-port", type=int, default=CONTROLLER_PORT, metavar="PORT",
                        help=f"KRaft controller listener port, not advertised "
                             f"(default {CONTROLLER_PORT})")
    parser.add_argument("--advertised-host", default="localhost", metavar="HOST",
                        help="host name the listeners advertise (default localhost; the "
                             "example certificate covers localhost and 127.0.0.1)")
    parser.add_argument("--scram-user", action="append", type=_user, default=[],
                        metavar="USER:PASSWORD",
                        help="a SCRAM-SHA-512 user to create at start (repeatable; default "
                             f"{DEFAULT_USER[0]}:{DEFAULT_USER[1]}); client.properties logs in "
                             "as the first")
    parser.add_argument("--fetch-only", action="store_true",
                        help="fetch the Apache Kafka jars into the cache and exit")


def run(args):
    try:
        return _run(args)
    except CommandError as exc:
        print(f"kafka-dev: {exc}", file=sys.stderr)
        return 1


def _run(args):
    ports = (args.plaintext_port, args.sasl_ssl_port, args.controller_port)
    for p in ports:
        if not 0 < p < 65536:
            print(f"kafka-dev: invalid port {p}", file=sys.stderr)
            return 2
    if len(set(ports)) != 3:
        print("kafka-dev: the PLAINTEXT, SASL_SSL and controller ports must differ",
              file=sys.stderr)
        return 2
    java = java_binary()
    if java is None and not args.fetch_only:
        raise CommandError(
            "Apache Kafka needs Java 17 or later, and there is no `java` on PATH or in "
            "JAVA_HOME. Install one (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) "
            "and run the command again.")
    home = kafka_home()
    libs = fetch_kafka(home)
    if args.fetch_only:
        print(f"Apache Kafka {kafka_version()} jars in {libs}")
        return 0
    busy = [p for p in ports if not _port_free(p)]
    if busy:
        raise CommandError(
            f"port {', '.join(map(str, busy))} on 127.0.0.1 is in use (another broker or "
            "kchannel serve?); stop it or choose other ports with --plaintext-port, "
            "--sasl-ssl-port and --controller-port.")

    directory = os.path.abspath(args.dir)
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    users = args.scram_user or [DEFAULT_USER]
    ca_path, keystore = _certificates(os.path.join(directory, "certs"))
    config = _write_properties(os.path.join(directory, "server.properties"), server_properties(
        directory, ports, args.advertised_host, keystore, ca_path))
    client_props = _write_properties(os.path.join(directory, "client.properties"),
                                     client_properties(*users[0], ca_path))
    log_path = os.path.join(directory, "logs", "server.log")
    log4j = os.path.join(directory, "log4j2.properties")
    with open(log4j, "w", encoding="utf-8") as f:
        f.write(_LOG4J.format(log=log_path))
    _format_storage(java, libs, log4j, config, directory)

    stop = []

    def on_signal(signum, _frame):
        stop.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    proc = None
    try:
        with open(os.path.join(directory, "logs", "kafka.out"), "w") as out:
            # Its own session: Ctrl-C reaches this command only, which then
            # stops the JVM once (SIGTERM: Kafka's controlled shutdown).
            proc = subprocess.Popen(
                _java_command(java, libs, log4j, "kafka.Kafka", [config]), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory,
                start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        plaintext = f"127.0.0.1:{ports[0]}"
        sasl_ssl = f"{args.advertised_host}:{ports[1]}"
        stopping = lambda: bool(stop)  # noqa: E731
        _wait_started(proc, log_path, deadline, stopping)
        if not stop:
            _retrying("creating the SCRAM users", deadline,
                      lambda: _create_users(plaintext, users), stopping)
        while not stop and not _retrying("finding the group coordinator", deadline,
                                         lambda: _coordinator_ready(plaintext), stopping):
            if time.monotonic() > deadline:
                raise CommandError("the group coordinator did not become available within "
                                   f"{START_TIMEOUT_S:.0f} s; see {log_path}")
            time.sleep(0.2)
        if not stop:
            # The credentials reach the broker through the metadata log: a
            # first login may come before them (for milliseconds; a failure
            # that lasts is reported, not waited out).
            _retrying(f"logging in as {users[0][0]} on SASL_SSL",
                      min(deadline, time.monotonic() + LOGIN_RETRY_S),
                      lambda: _login(sasl_ssl, client_props), stopping)
        if not stop:
            print(f"Apache Kafka {kafka_version()} (pid {proc.pid}) is ready: "
                  f"PLAINTEXT {args.advertised_host}:{ports[0]}, "
                  f"SASL_SSL {sasl_ssl} (SCRAM-SHA-512 as {users[0][0]}: "
                  f"--command-config {client_props}); Ctrl-C stops it", flush=True)
        while not stop and proc.poll() is None:
            time.sleep(0.2)
        if proc.poll() is not None and not stop:
            raise CommandError(f"Apache Kafka exited with status {proc.returncode}; the end "
                               f"of {log_path}:\n{_tail(log_path)}")
        return _stop(proc)
    finally:
        if proc is not None and proc.poll() is None:
            _stop(proc)
        for s, h in old.items():
            signal.signal(s, h)


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            print(f"kafka-dev: Apache Kafka did not stop within {STOP_TIMEOUT_S:.0f} s and "
                  "was killed", file=sys.stderr)
            return 1
    print("Apache Kafka stopped", flush=True)
    return 0
