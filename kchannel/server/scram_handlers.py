"""Server handlers for DescribeUserScramCredentials (API 50) and
AlterUserScramCredentials (API 51).

Describe follows Kafka 4's broker (``ScramImage.describe``), checked against
Apache Kafka 4.3.1 by tests/server/test_scram_credential_apis.py:
  * no users (null or empty list): every user with a credential;
  * a user named twice: one DUPLICATE_RESOURCE result "Cannot describe SCRAM
    credentials for the same user twice in a single request: <user>";
  * a user without credentials (the empty name included): RESOURCE_NOT_FOUND
    "Attempt to describe a user credential that does not exist: <user>";
  * one result per distinct user, in the iteration order of the
    ``java.util.HashMap`` Kafka collects them in; error messages of
    successful results and of the response are "" (the schema default
    Kafka leaves), not null.

Alter follows ZooKeeper-mode Kafka (``ZkAdminManager``), which allows one
request to set several mechanisms of one user, as ``kafka-configs.sh
--add-config 'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]'`` sends them (Kafka 4's
KRaft controller refuses the second alteration of a user in one request with
DUPLICATE_RESOURCE; README, Limitations).  Upsertions carry salt +
SaltedPassword computed by the client; the server derives and stores only
StoredKey/ServerKey:
  * empty user name: UNACCEPTABLE_CREDENTIAL "Username must not be empty";
  * unknown mechanism: UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
  * iterations < 4096 or > 16384: UNACCEPTABLE_CREDENTIAL "Too few
    iterations" / "Too many iterations";
  * the same (user, mechanism) twice in one request, in upsertions and/or
    deletions: DUPLICATE_RESOURCE;
  * deleting a credential that does not exist: RESOURCE_NOT_FOUND;
  * otherwise all of a user's changes are applied in one transaction.
  An error for a user fails every change of that user in the request.

Authorization: Kafka requires DESCRIBE (API 50) or ALTER (API 51) on the
CLUSTER resource.  kchannel has no ACL authorizer, and a Kafka broker without
one would let any client read and replace every user's credentials, so
kchannel allows these APIs only to the principals in ``super.users``
(Kafka's key, ``User:admin;User:ops``); everyone else, ``User:ANONYMOUS``
included, gets CLUSTER_AUTHORIZATION_FAILED with Kafka's message.  With no
super users nobody may use them.  Pass ``authorize(principal, operation) ->
bool`` (operation ``"DESCRIBE"`` or ``"ALTER"``) to decide otherwise.

Register with ``register_scram_handlers(server, store)`` (super users from
the server's ``super.users``) or ``register_scram_handlers(server, store,
super_users="User:admin")``.
"""

from kchannel.principal import parse_super_users
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.sasl import scram
from kchannel.security.sasl.oauthbearer import java_hashmap_order
from kchannel.security.sasl.scram_store import credential_from_salted_password
from kchannel.log import get_logger
from kchannel.server.interface import BrokerServer

log = get_logger("kchannel.security.sasl.scram_handlers")

MAX_ITERATIONS = 16384

USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
ATTEMPT_TO_DESCRIBE_UNKNOWN = "Attempt to describe a user credential that does not exist"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_UNKNOWN = "Attempt to delete a user credential that does not exist"


class SuperUserAuthorizer:
    """``authorize(principal, operation)`` granting every operation to the
    principals of ``super.users`` (a property value or an iterable of
    principals) and nothing to anyone else."""

    def __init__(self, super_users=None):
        self.super_users = parse_super_users(super_users)

    def __call__(self, principal, operation):
        return principal is not None and principal in self.super_users

    def __repr__(self):
        return f"SuperUserAuthorizer({sorted(map(str, self.super_users))})"


# Without configured super users nobody may describe or alter credentials.
default_authorize = SuperUserAuthorizer()


def _principal(ctx):
    return ctx.principal


def describe_user_scram_credentials(body, store):
    """Build a DescribeUserScramCredentials response body for ``body``."""
    users = body.get("users")
    names = None if not users else [u.get("name", "") for u in users]
    response = {"throttle_time_ms": 0, "error_code": 0, "error_message": "",
                "results": []}

    def result_for(user, creds):
        infos = [{"mechanism": scram.MECHANISMS[m].type, "iterations": creds[m].iterations}
                 for m in scram.MECHANISMS if m in creds]
        return {"user": user, "error_code": 0, "error_message": "",
                "credential_infos": infos}

    try:
        if names is None:
            listing = store.list()
            wanted = [user for user in sorted(listing) if listing[user]]
            response["results"] = [result_for(user, listing[user])
                                   for user in java_hashmap_order(wanted)]
            return response
        counts = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        results = {}
        for name, count in counts.items():
            if count > 1:
                results[name] = _user_error(
                    Errors.DUPLICATE_RESOURCE, name,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {name}")
        wanted = [n for n in counts if n not in results]
        listing = store.list(wanted) if wanted else {}
        for name in wanted:
            creds = listing.get(name)
            if creds:
                results[name] = result_for(name, creds)
            else:
                results[name] = _user_error(Errors.RESOURCE_NOT_FOUND, name,
                                            f"{ATTEMPT_TO_DESCRIBE_UNKNOWN}: {name}")
        response["results"] = [results[n] for n in java_hashmap_order(counts)]
        return response
    except Exception:
        log.exception("Error processing describe user SCRAM credential configs request")
        response["error_code"] = int(Errors.UNKNOWN_SERVER_ERROR)
        response["error_message"] = Errors.UNKNOWN_SERVER_ERROR.message
        response["results"] = []
        return response


def _user_error(error, user, message):
    return {"user": user, "error_code": int(error), "error_message": message,
            "credential_infos": []}


def _alter_result(user, error=Errors.NONE, message=None):
    return {"user": user, "error_code": int(error), "error_message": message}


def alter_user_scram_credentials(body, store):
    """Apply an AlterUserScramCredentials request body to ``store``; return
    the response body."""
    upsertions = list(body.get("upsertions") or [])
    deletions = list(body.get("deletions") or [])
    results = []

    # 1. Requests that are invalid on their own.  One message per user; a
    # user's upsertion errors take precedence over its deletion errors.
    illegal = {}
    for d in deletions:
        if d["name"] == "":
            illegal[""] = (Errors.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY)
        elif d["mechanism"] not in scram.MECHANISMS_BY_TYPE:
            illegal[d["name"]] = (Errors.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM)
    for u in upsertions:
        mech = scram.MECHANISMS_BY_TYPE.get(u["mechanism"])
        if u["name"] == "":
            illegal[""] = (Errors.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY)
        elif mech is None:
            illegal[u["name"]] = (Errors.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM)
        elif u["iterations"] < mech.min_iterations:
            illegal[u["name"]] = (Errors.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS)
        elif u["iterations"] > MAX_ITERATIONS:
            illegal[u["name"]] = (Errors.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS)
    for user, (error, message) in illegal.items():
        results.append(_alter_result(user, error, message))

    # 2. The same (user, mechanism) more than once.
    pairs = [(x["name"], x["mechanism"]) for x in upsertions + deletions
             if x["name"] not in illegal]
    seen, duplicated = set(), set()
    for pair in pairs:
        if pair in seen:
            duplicated.add(pair[0])
        seen.add(pair)
    for user in sorted(duplicated):
        results.append(_alter_result(user, Errors.DUPLICATE_RESOURCE, ALTERED_TWICE))

    candidates = []
    for user, _ in pairs:
        if user not in duplicated and user not in candidates:
            candidates.append(user)

    # 3. Per user: deleting what does not exist fails the user; otherwise
    # apply that user's changes atomically.
    for user in candidates:
        user_deletions = [(user, scram.MECHANISMS_BY_TYPE[d["mechanism"]].mechanism_name)
                          for d in deletions if d["name"] == user]
        try:
            missing = [m for _, m in user_deletions if store.get(user, m) is None]
            if missing:
                results.append(_alter_result(user, Errors.RESOURCE_NOT_FOUND, DELETE_UNKNOWN))
                continue
            user_upsertions = []
            for u in upsertions:
                if u["name"] != user:
                    continue
                mech = scram.MECHANISMS_BY_TYPE[u["mechanism"]]
                credential = credential_from_salted_password(
                    mech.mechanism_name, bytes(u["salt"]), bytes(u["salted_password"]),
                    u["iterations"])
                user_upsertions.append((user, mech.mechanism_name, credential))
            store.alter(upsertions=user_upsertions, deletions=user_deletions)
        except Exception:
            log.exception("Error encountered while altering user SCRAM credentials")
            results.append(_alter_result(user, Errors.UNKNOWN_SERVER_ERROR,
                                         Errors.UNKNOWN_SERVER_ERROR.message))
            continue
        log.info("Altered SCRAM credentials of user %s (upserted %s, deleted %s)", user,
                 [m for _, m, _ in user_upsertions], [m for _, m in user_deletions])
        results.append(_alter_result(user))
    return {"throttle_time_ms": 0, "results": results}


def make_describe_handler(store, authorize=default_authorize):
    """``fn(ctx) -> body`` for DescribeUserScramCredentials."""

    def handle_describe_user_scram_credentials(ctx):
        body = ctx.body
        if not authorize(_principal(ctx), "DESCRIBE"):
            error = Errors.CLUSTER_AUTHORIZATION_FAILED
            return {"throttle_time_ms": 0, "error_code": int(error),
                    "error_message": error.message,
                    "results": [_user_error(error, u.get("name", ""), error.message)
                                for u in (body.get("users") or [])]}
        return describe_user_scram_credentials(body, store)

    return handle_describe_user_scram_credentials


def make_alter_handler(store, authorize=default_authorize):
    """``fn(ctx) -> body`` for AlterUserScramCredentials."""

    def handle_alter_user_scram_credentials(ctx):
        body = ctx.body
        if not authorize(_principal(ctx), "ALTER"):
            error = Errors.CLUSTER_AUTHORIZATION_FAILED
            users = sorted({x["name"] for x in (body.get("upsertions") or [])}
                           | {x["name"] for x in (body.get("deletions") or [])})
            return {"throttle_time_ms": 0,
                    "results": [_alter_result(u, error, error.message) for u in users]}
        return alter_user_scram_credentials(body, store)

    return handle_alter_user_scram_credentials


def register_scram_handlers(server: BrokerServer, store, authorize=None, super_users=None):
    """Register both handlers (version 0, the only one Kafka defines).

    Without ``authorize``, the principals of ``super_users`` (default: the
    server configuration's ``super.users``) are allowed, nobody else."""
    if authorize is None:
        if super_users is None:
            super_users = _configured_super_users(server)
        authorize = SuperUserAuthorizer(super_users)
    server.register_handler(int(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS),
                            make_describe_handler(store, authorize), 0, 0)
    server.register_handler(int(ApiKey.ALTER_USER_SCRAM_CREDENTIALS),
                            make_alter_handler(store, authorize), 0, 0)


def _configured_super_users(server):
    return server.config.get("super.users")
