"""``kchannel delegation-tokens``: Kafka's ``kafka-delegation-tokens.sh``.

    kchannel delegation-tokens --bootstrap-server HOST:PORT --command-config client.properties
        --create --max-life-time-period -1 [--renewer-principal User:bob ...]
                 [--owner-principal User:x]
        --renew --hmac HMAC --renew-time-period -1
        --expire --hmac HMAC --expiry-time-period -1
        --describe [--owner-principal User:alice ...]

Same flags, checks and output as Kafka's ``DelegationTokenCommand``
(dates as ``yyyy-MM-dd'T'HH:mm`` in local time).  Exit status: 0 success,
1 failure (the error on stderr, named as Kafka's exception), 2 usage error.
"""
import base64
import binascii
import sys
import time

from kchannel.cli._bootstrap import connect_bootstrap
from kchannel.config.properties import load_properties
from kchannel.errors import AuthenticationError, DelegationTokenError
from kchannel.protocol.errors import Errors
from kchannel.principal import KafkaPrincipal
from kchannel.tokens.admin import DelegationTokenAdmin

NAME = "delegation-tokens"
HELP = ("This tool helps to create, renew, expire, or describe delegation tokens "
        "(kafka-delegation-tokens.sh).")

_ERRORS_PACKAGE = "org.apache.kafka.common.errors."


def add_arguments(parser):
    parser.add_argument("--bootstrap-server", metavar="SERVERS",
                        help="REQUIRED: server(s) to use for bootstrapping.")
    parser.add_argument("--command-config", metavar="FILE",
                        help="REQUIRED: A property file containing configs to be passed to "
                             "Admin Client. Token management operations are allowed in secure "
                             "mode only. This config file is used to pass security related "
                             "configs.")
    parser.add_argument("--create", action="store_true",
                        help="Create a new delegation token. Use --renewer-principal option to "
                             "pass renewer principals.")
    parser.add_argument("--renew", action="store_true",
                        help="Renew delegation token. Use --renew-time-period option to set "
                             "renew time period.")
    parser.add_argument("--expire", action="store_true",
                        help="Expire delegation token. Use --expiry-time-period option to "
                             "expire the token.")
    parser.add_argument("--describe", action="store_true",
                        help="Describe delegation tokens for the given principals. Use "
                             "--owner-principal to pass owner/renewer principals. If "
                             "--owner-principal option is not supplied, all the user-owned "
                             "tokens and tokens where the user has Describe permissions will "
                             "be returned.")
    parser.add_argument("--owner-principal", action="append", metavar="PRINCIPAL",
                        help="owner is a Kafka principal. They should be in "
                             "principalType:name format.")
    parser.add_argument("--renewer-principal", action="append", metavar="PRINCIPAL",
                        help="renewer is a Kafka principal. They should be in "
                             "principalType:name format.")
    parser.add_argument("--max-life-time-period", type=int, metavar="MS",
                        help="Max life period for the token in milliseconds. If the value is "
                             "-1, then token max life time will default to the server side "
                             "config value of (delegation.token.max.lifetime.ms).")
    parser.add_argument("--renew-time-period", type=int, metavar="MS",
                        help="Renew time period in milliseconds. If the value is -1, then the "
                             "renew time period will default to the server side config value "
                             "of (delegation.token.expiry.time.ms).")
    parser.add_argument("--expiry-time-period", type=int, metavar="MS",
                        help="Expiry time period in milliseconds. If the value is -1, then the "
                             "token will get invalidated immediately.")
    parser.add_argument("--hmac", metavar="HMAC", help="HMAC of the delegation token")
    parser.set_defaults(_parser=parser)


class _Usage(Exception):
    pass


_FLAG = {
    "bootstrap_server": "bootstrap-server", "command_config": "command-config",
    "create": "create", "renew": "renew", "expire": "expire", "describe": "describe",
    "owner_principal": "owner-principal", "renewer_principal": "renewer-principal",
    "max_life_time_period": "max-life-time-period", "renew_time_period": "renew-time-period",
    "expiry_time_period": "expiry-time-period", "hmac": "hmac",
}


def _has(args, name):
    value = getattr(args, name, None)
    return value is not None and value is not False


def _check_args(args):
    """``DelegationTokenCommandOptions.checkArgs`` (and the one-action rule)."""
    actions = sum(bool(getattr(args, a)) for a in ("create", "renew", "expire", "describe"))
    if actions != 1:
        raise _Usage("Command must include exactly one action: --create, --renew, --expire "
                      "or --describe")

    def required(*names):
        for n in names:
            if not _has(args, n):
                raise _Usage(f'Missing required argument "[{_FLAG[n]}]"')

    def invalid(action, names):
        if _has(args, action):
            for n in names:
                if _has(args, n):
                    raise _Usage(f'Option "[{_FLAG[action]}]" can\'t be used with option '
                                 f'"[{_FLAG[n]}]"')

    required("bootstrap_server", "command_config")
    if args.create:
        required("max_life_time_period")
    if args.renew:
        required("hmac", "renew_time_period")
    if args.expire:
        required("hmac", "expiry_time_period")
    invalid("create", ("hmac", "renew_time_period", "expiry_time_period"))
    invalid("renew", ("renewer_principal", "max_life_time_period", "expiry_time_period",
                      "owner_principal"))
    invalid("expire", ("renew", "max_life_time_period", "renew_time_period", "owner_principal"))
    invalid("describe", ("renew_time_period", "max_life_time_period", "hmac",
                         "expiry_time_period"))


def _principals(values):
    out = []
    for v in values or ():
        text = v.strip()
        if ":" not in text:
            # SecurityUtils.parseKafkaPrincipal's message.
            raise _Failure("expected a string in format principalType:principalName but got "
                           f"{text}")
        out.append(KafkaPrincipal.from_string(text))
    return out


class _Failure(Exception):
    pass


def _java_list(items):
    return "[" + ", ".join(str(i) for i in items) + "]"


def _date(ms):
    """SimpleDateFormat("yyyy-MM-dd'T'HH:mm") in the local time zone."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000.0))


def format_tokens(tokens):
    """``printToken``'s text for ``tokens`` (list of DelegationToken)."""
    fmt = "\n%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s\n"
    out = [fmt % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE",
                  "EXPIRYDATE", "MAXDATE")]
    for t in tokens:
        info = t.token_info
        out.append(fmt % (info.token_id, t.hmac_base64, info.owner, info.token_requester,
                          _java_list(info.renewers_as_string), _date(info.issue_timestamp),
                          _date(info.expiry_timestamp), _date(info.max_timestamp)))
    return "".join(out)


def _connect(bootstrap, command_config):
    try:
        configs = dict(load_properties(command_config))
    except OSError as exc:
        raise _Failure(f"{command_config} ({exc.strerror or exc})") from None
    return connect_bootstrap(bootstrap, configs, _Failure)[1]


def _error_text(exc):
    if isinstance(exc, DelegationTokenError):
        name = getattr(exc, "exception_name", None) or "KafkaException"
        return f"{_ERRORS_PACKAGE}{name}: {exc.message}"
    if isinstance(exc, AuthenticationError):
        name = ("SaslAuthenticationException" if exc.error_code == Errors.SASL_AUTHENTICATION_FAILED
                else "SslAuthenticationException" if exc.error_code is None
                else "AuthenticationException")
        return f"{_ERRORS_PACKAGE}{name}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def run(args):
    out = sys.stdout
    try:
        _check_args(args)
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        parser = getattr(args, "_parser", None)
        if parser is not None:
            parser.print_usage(sys.stderr)
        return 2
    client = None
    try:
        renewers = _principals(args.renewer_principal)
        owners = _principals(args.owner_principal)
        client = _connect(args.bootstrap_server, args.command_config)
        admin = DelegationTokenAdmin(client)
        if args.create:
            max_life = args.max_life_time_period
            out.write(f"Calling create token operation with renewers :{_java_list(renewers)} "
                      f", max-life-time-period :{max_life}\n")
            token = admin.create(renewers=renewers, max_lifetime_ms=max_life,
                                 owner=owners[0] if owners else None)
            out.write(f"Created delegation token with tokenId : {token.token_info.token_id}\n")
            out.write(format_tokens([token]))
        elif args.renew:
            out.write(f"Calling renew token operation with hmac :{args.hmac} , "
                      f"renew-time-period :{args.renew_time_period}\n")
            expiry = admin.renew(_decode_hmac(args.hmac), args.renew_time_period)
            out.write(f"Completed renew operation. New expiry date : {_date(expiry)}")
        elif args.expire:
            out.write(f"Calling expire token operation with hmac :{args.hmac} , "
                      f"expire-time-period :{args.expiry_time_period}\n")
            expiry = admin.expire(_decode_hmac(args.hmac), args.expiry_time_period)
            out.write(f"Completed expire operation. New expiry date : {_date(expiry)}")
        else:
            if not owners:
                out.write("Calling describe token operation for current user.\n")
            else:
                out.write(f"Calling describe token operation for owners: {_java_list(owners)}\n")
            tokens = admin.describe(owners if owners else None)
            out.write(f"Total number of tokens : {len(tokens)}")
            out.write(format_tokens(tokens))
        out.flush()
        return 0
    except _Failure as exc:
        out.flush()
        print(str(exc), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a tool reports and exits 1
        out.flush()
        print(_error_text(exc), file=sys.stderr)
        return 1
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass


def _decode_hmac(text):
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _Failure(f"java.lang.IllegalArgumentException: Illegal base64 character in "
                       f"HMAC {text!r}") from None
