"""Delegation tokens for Spark executors (Spark's ``KafkaTokenUtil`` model).

The driver logs in with the user's own credentials (any SASL mechanism:
SCRAM, PLAIN, GSSAPI keytab, OAUTHBEARER), obtains a delegation token with
CreateDelegationToken, and executors log in with the token only (SCRAM,
``tokenauth=true``): the executor configuration keeps the cluster,
``security.protocol`` and TLS settings, drops every ``sasl.*`` key of the
driver and carries the token id and HMAC instead.

A token is cached per driver configuration in the (reused) planning
process.  As Spark's ``HadoopDelegationTokenManager`` does
(``spark.security.credentials.renewalRatio``, 0.75), once ``renewal_ratio``
of the time from its issue (or last renewal) to its expiry has passed, the
driver renews it (RenewDelegationToken: same id and HMAC, so executors'
connections and cached clients stay valid); when it cannot be renewed any
further (its max lifetime caps the expiry) or renewal fails, a new token
is obtained.  Batch queries plan once; a streaming query asks again at
every micro-batch (``KChannelStreamReader.partitions``), so a long query
keeps a valid token and its executors always receive the current one.

In KRaft the broker learns of a new token when it replays the controller's
record, a moment after CreateDelegationToken answers: :func:`obtain_token`
waits (up to 30 s) until DescribeDelegationToken lists it, so the first
executor login never races the broker.
"""
import threading
import time

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.config.aliases import jaas_quote
from kchannel.config.jaas import SCRAM_LOGIN_MODULE
from kchannel.log import get_logger
from kchannel.spark.workers import config_key, token_id_of
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.token import DelegationToken

__all__ = ["obtain_token", "executor_configs", "is_secret_option", "token_id_of",
           "login_failure", "TOKEN_MECHANISMS", "RENEWAL_RATIO"]

log = get_logger("kchannel.spark.tokens")

TOKEN_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RENEWAL_RATIO = 0.75
_VISIBLE_WAIT_S = 30.0

_lock = threading.Lock()
_tokens = {}    # driver config key -> [DelegationToken, renewed at (ms)]


def _is_secret_key(key):
    return key.startswith("sasl.") or key in ("sasl_plain_username", "sasl_plain_password")


def obtain_token(driver_configs, renewers=(), max_lifetime_ms=-1,
                 renewal_ratio=RENEWAL_RATIO, now_ms=None):
    """A valid delegation token of the driver's principal (cached, renewed
    or replaced as the module docstring says).  Fails with the broker's
    reason when the driver cannot get one (tokens disabled, a non-SASL or
    token-authenticated login...)."""
    key = config_key(driver_configs) + (("renewers", ",".join(renewers)),
                                        ("max.lifetime.ms", str(max_lifetime_ms)))
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    with _lock:
        entry = _tokens.get(key)
        if entry is not None:
            token, since = entry
            info = token.token_info
            if now_ms < since + renewal_ratio * (info.expiry_timestamp - since):
                return token
            if info.expiry_timestamp < info.max_timestamp and now_ms < info.expiry_timestamp:
                renewed = _renew(driver_configs, token)
                if renewed is not None and renewed > info.expiry_timestamp:
                    token = DelegationToken(info.copy(expiry_timestamp=renewed), token.hmac)
                    _tokens[key] = [token, now_ms]
                    log.info("Renewed delegation token %s (expires at %s)", info.token_id,
                             renewed)
                    return token
        token = _create(driver_configs, renewers, max_lifetime_ms)
        _tokens[key] = [token, now_ms]
        return token


def _renew(driver_configs, token):
    """RenewDelegationToken; None if the broker refused (logged)."""
    try:
        with KafkaClient(dict(driver_configs)) as client:
            client.connect()
            return DelegationTokenAdmin(client).renew(token.hmac)
    except errors.KChannelError as exc:
        log.warning("Could not renew delegation token %s (%s); obtaining a new one",
                    token.token_info.token_id, exc)
        return None


def _create(driver_configs, renewers, max_lifetime_ms):
    protocol = str(driver_configs.get("security.protocol", "PLAINTEXT")).upper()
    if not protocol.startswith("SASL_"):
        raise errors.ConfigError(
            "Delegation tokens need a SASL login on the driver: security.protocol is "
            f"{protocol}; set kafka.security.protocol to SASL_SSL or SASL_PLAINTEXT with "
            "the driver's credentials", key="kafka.security.protocol", value=protocol)
    with KafkaClient(dict(driver_configs)) as client:
        client.connect()
        admin = DelegationTokenAdmin(client)
        try:
            token = admin.create(renewers=list(renewers), max_lifetime_ms=max_lifetime_ms)
        except errors.DelegationTokenError as exc:
            raise errors.DelegationTokenError(
                exc.error_code, exc.name,
                f"The driver could not obtain a delegation token for the executors: "
                f"{exc.message or exc.name}") from exc
        deadline = time.monotonic() + _VISIBLE_WAIT_S
        token_id = token.token_info.token_id
        while token_id not in {t.token_info.token_id for t in admin.describe()}:
            if time.monotonic() > deadline:
                raise errors.KChannelError(
                    f"The broker did not list the new delegation token {token_id} within "
                    f"{_VISIBLE_WAIT_S:.0f} s; executors could not log in with it")
            time.sleep(0.05)
    log.info("Obtained delegation token %s for the executors (expires at %s)",
             token_id, token.token_info.expiry_timestamp)
    return token


def login_failure(configs, exc):
    """An executor's login failure, naming the delegation token when the
    executor logged in with one (the usual cause: it expired, or was
    expired, while the job ran); else ``exc`` itself."""
    token_id = token_id_of(configs)
    if token_id is None:
        return exc
    return errors.SaslAuthenticationError(
        f"The executor could not log in with delegation token {token_id}: the token has "
        f"expired or was expired (ExpireDelegationToken) or removed while the job ran, or "
        f"its owner lost access. Run the query again: the driver obtains a new token when "
        f"the current one is not valid (streaming queries renew theirs at every "
        f"micro-batch). Broker said: {exc}")


def executor_configs(driver_configs, token, mechanism="SCRAM-SHA-512"):
    """The executors' client configuration: the driver's without any
    ``sasl.*`` credential, logging in with ``token`` (SCRAM tokenauth)."""
    mechanism = str(mechanism).upper()
    if mechanism not in TOKEN_MECHANISMS:
        raise errors.ConfigError(
            f"Delegation tokens log in with SCRAM-SHA-256 or SCRAM-SHA-512, not {mechanism}",
            key="kchannel.delegationToken.mechanism", value=mechanism)
    out = {k: v for k, v in driver_configs.items() if not _is_secret_key(k)}
    out["sasl.mechanism"] = mechanism
    out["sasl.jaas.config"] = (
        f"{SCRAM_LOGIN_MODULE} required username={jaas_quote(token.token_info.token_id)} "
        f"password={jaas_quote(token.hmac_base64)} tokenauth=\"true\";")
    return out


def is_secret_option(name):
    """True for a data source option holding a driver credential
    (``kafka.sasl.*``)."""
    name = str(name).lower()
    return name.startswith("kafka.") and _is_secret_key(name[len("kafka."):])
