"""Delegation tokens for Spark executors (Spark's ``KafkaTokenUtil`` model).

The driver logs in with the user's own credentials (any SASL mechanism:
SCRAM, PLAIN, GSSAPI keytab, OAUTHBEARER), obtains a delegation token with
CreateDelegationToken, and executors log in with the token only (SCRAM,
``tokenauth=true``): the executor configuration keeps the cluster,
``security.protocol`` and TLS settings, drops every ``sasl.*`` key of the
driver and carries the token id and HMAC instead.

A token is cached per driver configuration in the (reused) planning
process and handed out again while more than ``RENEW_MARGIN`` of its
lifetime is left; otherwise a new one is obtained, so a query planned after
the old token's expiry gets a fresh one.

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
from kchannel.spark.workers import config_key
from kchannel.tokens.admin import DelegationTokenAdmin

__all__ = ["obtain_token", "executor_configs", "is_secret_option", "TOKEN_MECHANISMS"]

log = get_logger("kchannel.spark.tokens")

TOKEN_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RENEW_MARGIN = 0.25
_VISIBLE_WAIT_S = 30.0

_lock = threading.Lock()
_tokens = {}    # driver config key -> DelegationToken


def _is_secret_key(key):
    return key.startswith("sasl.") or key in ("sasl_plain_username", "sasl_plain_password")


def obtain_token(driver_configs, renewers=(), max_lifetime_ms=-1):
    """A delegation token of the driver's principal (cached, see the module
    docstring).  Fails with the broker's reason when the driver cannot get
    one (tokens disabled, a non-SASL or token-authenticated login...)."""
    key = config_key(driver_configs) + (("renewers", ",".join(renewers)),
                                        ("max.lifetime.ms", str(max_lifetime_ms)))
    now_ms = time.time() * 1000
    with _lock:
        token = _tokens.get(key)
        if token is not None:
            info = token.token_info
            left = info.expiry_timestamp - now_ms
            if left > RENEW_MARGIN * (info.expiry_timestamp - info.issue_timestamp):
                return token
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
        _tokens[key] = token
        return token


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
