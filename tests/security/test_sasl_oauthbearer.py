"""SASL OAUTHBEARER: RFC 7628 messages, KIP-255 unsecured JWS, Kafka's server flow."""
import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel.errors import ConfigError, SaslAuthenticationError
from kchannel.security.sasl import mechanism
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.oauthbearer import (
    GENERIC_FAILURE_MESSAGE, ClientInitialResponse, OAuthBearerConfigError,
    OAuthBearerIllegalTokenError, OAuthBearerToken, OAuthBearerUnsecuredJws,
    OAuthBearerValidationError, UnsecuredLogin, UnsecuredValidator, java_double_to_string,
    java_hashmap_order, json_error_response)
from tests.fixtures.peers import require_module

NOW = 1_700_000_000_123          # epoch ms used throughout
SUB_OPTIONS = {"unsecuredLoginStringClaim_sub": "alice"}


def b64(text):
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def unsecured(claims, header='{"alg":"none"}'):
    if not isinstance(claims, str):
        claims = json.dumps(claims)
    return f"{b64(header)}.{b64(claims)}."


def oauth_client(options=SUB_OPTIONS, now=NOW, **kw):
    return mechanism.create_client("OAUTHBEARER", jaas_options=options, configs={},
                                   server_host="localhost", now=now, **kw)


def bearer_server(options=None, callbacks=None, configs=None):
    return mechanism.create_server("OAUTHBEARER", jaas_options=options or {},
                                   configs=configs or {}, callbacks=callbacks,
                                   server_host="localhost", now=NOW)


def initial(token, extensions=None, authzid=""):
    return ClientInitialResponse(token, authzid, extensions).to_bytes()


# -- client initial response --------------------------------------------------------------

def test_build_client_response_vector():
    """Kafka: OAuthBearerClientInitialResponseTest.testBuildClientResponseToBytes,
    testAuthorizationId."""
    assert initial("123.345.567", {"nineteen": "42"}) == \
        b"n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01"
    assert initial("tok", authzid="bob") == b"n,a=bob,\x01auth=Bearer tok\x01\x01"


def test_parse_round_trip_and_rfc_examples():
    """Kafka: OAuthBearerClientInitialResponseTest.testBuildServerResponseToBytes, testToken,
    testExtensions, testRfc7688Example, testCharSupportForRfc6750Token."""
    msg = b"n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01"
    assert ClientInitialResponse.parse(msg).to_bytes() == msg
    r = ClientInitialResponse.parse(b"n,a=myuser,\x01auth=Bearer 345\x01\x01")
    assert (r.token_value, r.authorization_id) == ("345", "myuser")
    r = ClientInitialResponse.parse(
        b"n,,\x01propA=valueA1, valueA2\x01auth=Bearer 567\x01propB=valueB\x01\x01")
    assert r.token_value == "567"
    assert r.extensions == {"propA": "valueA1, valueA2", "propB": "valueB"}
    r = ClientInitialResponse.parse(
        b"n,a=user@example.com,\x01host=server.example.com\x01port=143\x01"
        b"auth=Bearer vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==\x01\x01")
    assert r.token_value == "vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg=="
    assert r.authorization_id == "user@example.com"
    assert r.extensions == {"host": "server.example.com", "port": "143"}


@pytest.mark.parametrize("extensions,message", [
    ({"19": "42"}, "Extension name 19 is invalid"),
    ({"auth": "x"}, "Extension name auth is invalid"),
    ({"key": "\u00c7alifornia"}, "Extension value (\u00c7alifornia) for extension key is invalid"),
])
def test_invalid_extensions_rejected_on_build(extensions, message):
    """Kafka: OAuthBearerClientInitialResponseTest.testThrowsSaslExceptionOnInvalidExtensionKey."""
    with pytest.raises(ValueError) as info:
        ClientInitialResponse("t", "", extensions)
    assert str(info.value) == message


def test_client_initial_response_from_unsecured_login_is_byte_exact():
    """Same bytes Kafka's OAuthBearerUnsecuredLoginCallbackHandler produces at NOW."""
    mech = oauth_client(dict(SUB_OPTIONS, unsecuredLoginExtension_traceId="abc"))
    out = mech.evaluate_challenge(b"")
    header = "eyJhbGciOiJub25lIn0"          # {"alg":"none"}
    claims = b64('{"exp":1.700003600123E9,"iat":1.700000000123E9,"sub":"alice"}')
    assert out == (f"n,,\x01auth=Bearer {header}.{claims}.\x01traceId=abc\x01\x01").encode()


# -- unsecured tokens -------------------------------------------------------------------------

def test_unsecured_login_claims():
    """Kafka: OAuthBearerUnsecuredLoginCallbackHandlerTest.validOptionsWithExplicitOptionValues."""
    jws = UnsecuredLogin({
        "unsecuredLoginStringClaim_principal": "user",
        "unsecuredLoginListClaim_list": ",1,2,",
        "unsecuredLoginListClaim_emptyList1": "",
        "unsecuredLoginListClaim_emptyList2": ",",
        "unsecuredLoginNumberClaim_number": "1",
        "unsecuredLoginLifetimeSeconds": "10000",
        "unsecuredLoginPrincipalClaimName": "principal",
        "unsecuredLoginListClaim_scope": "|scope1|scope2",
    }).token(NOW)
    assert jws.header == {"alg": "none"}
    assert jws.principal_name == "user"
    assert jws.start_time_ms == NOW
    assert jws.lifetime_ms == NOW + 10_000_000
    assert set(jws.claims) == {"scope", "principal", "iat", "exp", "number", "list",
                               "emptyList1", "emptyList2"}
    assert jws.scope == {"scope1", "scope2"}
    assert jws.claim("number", "number") == 1.0
    assert jws.claim("list", list) == ["1", "2", ""]
    assert jws.claim("emptyList1", list) == [] and jws.claim("emptyList2", list) == []


@pytest.mark.parametrize("options,message", [
    ({}, "Token not provided"),
    ({"unsecuredLoginExtension_a": "1"}, "Extensions provided in login context without a token"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginStringClaim_exp": "1"},
     "Cannot explicitly set the 'exp' claim"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "x"},
     'For input string: "x"'),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "1_0"},
     'For input string: "1_0"'),
    ({"unsecuredLoginStringClaim_user": "a"}, "No principal name in JWT claim: sub"),
])
def test_unsecured_login_config_errors(options, message):
    with pytest.raises(OAuthBearerConfigError, match=message):
        UnsecuredLogin(options).token(NOW)


def test_unsecured_login_extension_errors():
    """Kafka: OAuthBearerUnsecuredLoginCallbackHandlerTest.addsExtensions,
    throwsErrorOnInvalidExtensionName."""
    with pytest.raises(ConfigError, match="Extension name test.Id is invalid"):
        UnsecuredLogin(dict(SUB_OPTIONS, **{"unsecuredLoginExtension_test.Id": "1"})).extensions()
    assert UnsecuredLogin(dict(SUB_OPTIONS, unsecuredLoginExtension_testId="1")).extensions() == \
        {"testId": "1"}


@pytest.mark.parametrize("token,message", [
    ("a..b", "Malformed compact serialization contains '..'"),
    ("abc.def", "must have 3 dot-separated"),
    ("!!!.e30.", "malformed Base64 URL encoded value"),
    (f"{b64('[')}.e30.", "malformed JSON"),
    (unsecured({"exp": 1, "sub": "a"}, header='{"alg":"HS256"}'),
     "Unsecured JWS must have 'none' for an algorithm"),
    (unsecured({"exp": 1, "sub": "a"}) + "sig", "must not contain a digital signature"),
    (unsecured({"sub": "a"}), "No expiration time in JWT"),
    (unsecured({"exp": 1}), "No principal name in JWT claim: sub"),
    (unsecured({"exp": 1, "sub": 5}), "The 'sub' claim was not of type String: Integer"),
    (unsecured({"exp": "soon", "sub": "a"}), "The 'exp' claim was not of type Number: String"),
    (unsecured({"exp": 1, "sub": "a", "scope": 7}), "The 'scope' claim was not of type List"),
])
def test_unsecured_jws_errors(token, message):
    """Kafka: OAuthBearerUnsecuredJwsTest.missingPrincipal;
    OAuthBearerValidationUtilsTest.validateClaimForExistenceAndType."""
    with pytest.raises(OAuthBearerIllegalTokenError, match=message) as info:
        OAuthBearerUnsecuredJws(token)
    assert info.value.status == "invalid_token"


def test_unsecured_jws_scope_forms():
    assert OAuthBearerUnsecuredJws(unsecured({"exp": 1, "sub": "a", "scope": " x y "})).scope == \
        {"x y"}                                   # a string claim is one item, as Kafka
    assert OAuthBearerUnsecuredJws(unsecured({"exp": 1, "sub": "a", "scope": ["x", " ", "y "]})
                                   ).scope == {"x", "y"}


def test_unsecured_validator_results():
    """Kafka: OAuthBearerUnsecuredValidatorCallbackHandlerTest.validToken, badOrMissingPrincipal,
    tooEarlyExpirationTime; OAuthBearerValidationUtilsTest.validateIssuedAt,
    validateExpirationTime, validateExpirationTimeAndIssuedAtConsistency."""
    v = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "principal",
                            "unsecuredValidatorAllowableClockSkewMs": "1"})
    exp = NOW / 1000.0 + 3600
    for claims in ({"principal": "username", "exp": exp},
                   {"principal": "username", "exp": exp, "iat": NOW / 1000.0}):
        assert v.validate(unsecured(claims), NOW).principal_name == "username"
    with pytest.raises(OAuthBearerIllegalTokenError, match="No principal name"):
        v.validate(unsecured({"exp": exp}), NOW)
    with pytest.raises(OAuthBearerIllegalTokenError, match="on or after the Expiration Time"):
        v.validate(unsecured({"principal": "u", "exp": NOW / 1000.0, "iat": NOW / 1000.0 - 1}),
                   NOW + 1)
    with pytest.raises(OAuthBearerIllegalTokenError, match="Issued At value .* was after"):
        v.validate(unsecured({"principal": "u", "exp": exp, "iat": NOW / 1000.0 + 1}), NOW)
    skewed = UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "10000"})
    with pytest.raises(OAuthBearerIllegalTokenError, match="was not after the Issued At time"):
        skewed.validate(unsecured({"sub": "u", "exp": NOW / 1000.0 + 4,
                                   "iat": NOW / 1000.0 + 5}), NOW)


def test_unsecured_validator_scope():
    """Kafka: OAuthBearerUnsecuredValidatorCallbackHandlerTest.includesRequiredScope,
    missingRequiredScope; OAuthBearerValidationUtilsTest.validateScope."""
    token = unsecured({"sub": "username", "exp": NOW / 1000.0 + 60, "scope": "scope1"})
    assert UnsecuredValidator({"unsecuredValidatorRequiredScope": "scope1"}).validate(token, NOW)
    with pytest.raises(OAuthBearerIllegalTokenError) as info:
        UnsecuredValidator({"unsecuredValidatorRequiredScope": "scope1 scope2"}).validate(
            token, NOW)
    assert info.value.status == "insufficient_scope"
    assert info.value.scope == "[scope1, scope2]"


@pytest.mark.parametrize("options,message", [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "must not be negative"),
    ({"unsecuredValidatorAllowableClockSkewMs": "x"}, 'For input string: "x"'),
    ({"unsecuredValidatorRequiredScope": "a\"b"}, "Invalid scope value: a\"b"),
])
def test_unsecured_validator_config_errors(options, message):
    with pytest.raises(OAuthBearerConfigError, match=message):
        UnsecuredValidator(options)


# -- client/server exchange -------------------------------------------------------------------

def test_round_trip():
    """Kafka: OAuthBearerSaslServerTest.noAuthorizationIdSpecified, negotiatedProperty,
    savesCustomExtensionAsNegotiatedProperty."""
    c, s = oauth_client(dict(SUB_OPTIONS, unsecuredLoginListClaim_scope=" a b",
                             unsecuredLoginExtension_traceId="t1")), bearer_server()
    assert c.has_initial_response()
    challenge = s.evaluate_response(c.evaluate_challenge(b""), NOW)
    assert challenge == b"" and s.is_complete()
    assert c.evaluate_challenge(challenge) is None and c.is_complete()
    assert s.get_authorization_id() == "alice"
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") == NOW + 3_600_000
    assert c.get_negotiated_property("CREDENTIAL.LIFETIME.MS") == NOW + 3_600_000
    assert s.get_negotiated_property("OAUTHBEARER.token").scope == {"a", "b"}
    assert s.get_negotiated_property("traceId") == "t1"    # validated extension
    assert not s.token_authenticated


def test_expired_token_error_flow():
    """Kafka: OAuthBearerSaslServerTest.illegalToken."""
    c = oauth_client(dict(SUB_OPTIONS, unsecuredLoginLifetimeSeconds="60"))
    s = bearer_server()
    later = NOW + 60_000
    challenge = s.evaluate_response(c.evaluate_challenge(b""), later)
    assert challenge == b'{"status":"invalid_token"}'
    assert not s.is_complete()
    ack = c.evaluate_challenge(challenge)
    assert ack == b"\x01" and c.state == "RECEIVE_SERVER_MESSAGE_AFTER_FAILURE"
    assert c.error_response == '{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate_response(ack, later)
    assert str(info.value) == '{"status":"invalid_token"}'   # Kafka sends the JSON as message
    with pytest.raises(SaslAuthenticationError, match="Unexpected challenge in Sasl client state"):
        c.evaluate_challenge(b"more")


def test_missing_required_scope_error_json():
    s = bearer_server({"unsecuredValidatorRequiredScope": "scope1 scope2"})
    challenge = s.evaluate_response(oauth_client().evaluate_challenge(b""), NOW)
    assert challenge == b'{"status":"insufficient_scope", "scope":"[scope1, scope2]"}'


def test_error_json_format():
    assert json_error_response("invalid_token") == '{"status":"invalid_token"}'
    assert json_error_response("invalid_token", "s", "https://x/.well-known") == \
        '{"status":"invalid_token", "scope":"s", "openid-configuration":"https://x/.well-known"}'


def test_new_initial_response_after_error_is_processed_again():
    """Kafka clears the error when anything but %x01 follows it."""
    s = bearer_server()
    assert s.evaluate_response(initial(unsecured({"sub": "a", "exp": 1})), NOW).startswith(b"{")
    assert s.evaluate_response(oauth_client().evaluate_challenge(b""), NOW) == b""
    assert s.get_authorization_id() == "alice"


def test_authorization_id_must_match_principal():
    """Kafka: OAuthBearerSaslServerTest.authorizationIdEqualsAuthenticationId,
    authorizationIdNotEqualsAuthenticationId."""
    s = bearer_server()
    token = UnsecuredLogin(SUB_OPTIONS).token(NOW).value
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate_response(initial(token, authzid="bob"), NOW)
    assert str(info.value) == ("Authentication failed: Client requested an authorization id (bob) "
                               "that is different from the token's principal name (alice)")
    s = bearer_server()
    assert s.evaluate_response(initial(token, authzid="alice"), NOW) == b""


@pytest.mark.parametrize("message,detail", [
    (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
    (b"n,,\x01key=v\x01\x01", "'auth' not specified"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    (b"n,,\x01auth=Bearer t\x0119=42\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"\x01", "Invalid OAUTHBEARER client first message"),
])
def test_malformed_client_messages(message, detail):
    with pytest.raises(SaslAuthenticationError) as info:
        bearer_server().evaluate_response(message, NOW)
    assert str(info.value) == GENERIC_FAILURE_MESSAGE       # detail stays in the log
    assert detail in info.value.detail


class _Validator:
    """A deployment's validator: tokens are 'good-<user>'; rejects extension 'bad'."""

    def __init__(self):
        self.configured = None

    def configure(self, configs, mechanism_name, jaas_options):
        self.configured = (mechanism_name, jaas_options)

    def validate(self, token_value, now):
        if not token_value.startswith("good-"):
            raise OAuthBearerValidationError("bad token", scope="kafka",
                                             openid_configuration="https://idp/.well-known")
        return OAuthBearerToken(token_value, token_value[5:], now + 1000, {"kafka"})

    def validate_extensions(self, token, extensions):
        valid = {k: v for k, v in extensions.items() if k == "ok"}
        invalid = {k: "not allowed" for k in extensions if k == "bad"}
        return valid, invalid


def test_pluggable_validator_via_callbacks():
    """Kafka: OAuthBearerSaslServerTest.unrecognizedExtensionsAreNotSaved."""
    v = _Validator()
    s = bearer_server(callbacks=ServerCallbacks(oauth_validate=v.validate))
    assert s.evaluate_response(initial("good-carol", {"ok": "1", "other": "2"}), NOW) == b""
    assert s.get_authorization_id() == "carol"
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") == NOW + 1000
    # No extension validation offered: every extension is ignored (Kafka's
    # backwards-compatible behaviour), none is exposed.
    assert s.get_negotiated_property("ok") is None
    s = bearer_server(callbacks=ServerCallbacks(oauth_validate=v.validate))
    assert s.evaluate_response(initial("nope"), NOW) == (
        b'{"status":"invalid_token", "scope":"kafka", '
        b'"openid-configuration":"https://idp/.well-known"}')


def test_pluggable_validator_class_and_extension_validation():
    """Kafka: OAuthBearerSaslServerTest.throwsAuthenticationExceptionOnInvalidExtensions."""
    configs = {"sasl.server.callback.handler.class":
               f"{__name__}._Validator"}
    s = bearer_server({"opt": "1"}, configs=configs)
    assert s.evaluate_response(initial("good-dan", {"ok": "1", "other": "2"}), NOW) == b""
    assert s.extensions == {"ok": "1"}                 # "other" ignored, not exposed
    s = bearer_server(configs={
        "oauthbearer.sasl.server.callback.handler.class": f"{__name__}._Validator"})
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate_response(initial("good-dan", {"bad": "x"}), NOW)
    assert str(info.value) == \
        "Authentication failed: 1 extensions are invalid! They are: bad: not allowed"


def test_broken_validator_fails_closed():
    def boom(token, now):
        raise RuntimeError("database down")
    s = bearer_server(callbacks=ServerCallbacks(oauth_validate=boom))
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate_response(initial("t"), NOW)
    assert str(info.value) == GENERIC_FAILURE_MESSAGE
    assert "internal error on the server: database down" in info.value.detail


def test_java_class_names_for_handlers():
    java = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
            "OAuthBearerUnsecuredValidatorCallbackHandler")
    s = bearer_server(configs={"sasl.server.callback.handler.class": java})
    assert s.evaluate_response(oauth_client().evaluate_challenge(b""), NOW) == b""
    jwks = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url is required"):
        bearer_server(configs={"sasl.server.callback.handler.class": jwks})
    with pytest.raises(ConfigError, match="Java class"):
        bearer_server(configs={"sasl.server.callback.handler.class": "org.apache.kafka.Other"})


def test_client_rejects_non_empty_first_challenge():
    with pytest.raises(SaslAuthenticationError, match="Expected empty challenge"):
        oauth_client().evaluate_challenge(b"x")


# -- real client libraries' OAUTHBEARER code against our server --------------------------------

def test_kafka_python_oauth_against_our_server():
    oauth = pytest.importorskip("kafka.net.sasl.oauth", reason="kafka-python 3.x not installed")
    token = UnsecuredLogin(SUB_OPTIONS).token(NOW).value

    class Provider(oauth.AbstractTokenProvider):
        def token(self):
            return token

        def extensions(self):
            return {"traceId": "kp"}

    peer = oauth.SaslMechanismOAuth(sasl_oauth_token_provider=Provider())
    s = bearer_server()
    peer.receive(s.evaluate_response(peer.auth_bytes(), NOW))
    assert peer.is_authenticated() and s.get_authorization_id() == "alice"
    assert s.get_negotiated_property("traceId") == "kp"
    # Error path: kafka-python acknowledges with %x01 too.
    peer = oauth.SaslMechanismOAuth(sasl_oauth_token_provider=Provider())
    s = bearer_server()
    peer.receive(s.evaluate_response(peer.auth_bytes(), NOW + 3_600_000))
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        s.evaluate_response(peer.auth_bytes(), NOW)


# -- helpers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,text", [
    (1700000000.123, "1.700000000123E9"), (3600.0, "3600.0"), (1.0, "1.0"), (0.001, "0.001"),
    (0.0001, "1.0E-4"), (1e7, "1.0E7"), (9999999.0, "9999999.0"), (-2.5, "-2.5"),
    (123456.789, "123456.789"), (0.0, "0.0"),
])
def test_java_double_to_string(value, text):
    assert java_double_to_string(value) == text


def test_java_hashmap_order():
    # "a".hashCode() == 97 -> bucket 1, "b" -> 2, "zz" == 3904 -> bucket 0 (capacity 16)
    assert java_hashmap_order(["b", "a", "zz"]) == ["zz", "a", "b"]
    # new HashMap<>(twoEntries) has capacity 4: "i" (105) -> 1, "b" (98) -> 2, while
    # a put-built map (capacity 16) has "b" -> 2, "i" -> 9.
    assert java_hashmap_order(["b", "i"]) == ["b", "i"]
    assert java_hashmap_order(["b", "i"], copied=True) == ["i", "b"]
    # Same bucket: insertion order.  "Aa" and "BB" share hashCode 2112.
    assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]


# -- fail closed --------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(data=st.one_of(
    st.binary(max_size=512),
    st.builds(lambda t, e: b"n,,\x01auth=Bearer " + t + e + b"\x01\x01",
              st.binary(max_size=200), st.binary(max_size=60))))
def test_arbitrary_bytes_fail_closed(data):
    s = bearer_server({"unsecuredValidatorRequiredScope": "x"})
    try:
        challenge = s.evaluate_response(data, NOW)
    except SaslAuthenticationError:
        assert not s.is_complete()
        return
    # Anything accepted must be an error challenge, never a completed login.
    assert not s.is_complete()
    assert json.loads(challenge)["status"] in ("invalid_token", "insufficient_scope")
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(b"\x01", NOW)


@settings(max_examples=200, deadline=None)
@given(claims=st.dictionaries(st.sampled_from(["sub", "exp", "iat", "scope", "x"]),
                              st.one_of(st.none(), st.booleans(), st.integers(),
                                        st.floats(allow_nan=False), st.text(max_size=5),
                                        st.lists(st.one_of(st.text(max_size=3), st.integers()),
                                                 max_size=3))))
def test_arbitrary_claims_never_crash_validator(claims):
    token = unsecured(claims)
    s = bearer_server()
    try:
        challenge = s.evaluate_response(initial(token), NOW)
    except SaslAuthenticationError:
        return
    assert challenge == b"" or challenge.startswith(b'{"status":')


# -- end to end over 127.0.0.1 sockets: kchannel Server with an OAUTHBEARER listener --------

DESCRIBE_CLUSTER = 60
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture
def oauth_server():
    from kchannel.server import Server
    server = Server(listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                    listener_configs={"SASL_PLAINTEXT": {
                        "sasl.enabled.mechanisms": "OAUTHBEARER"}},
                    jaas={"OAUTHBEARER": {"unsecuredValidatorRequiredScope": "read",
                                          "unsecuredValidatorAllowableClockSkewMs": "5000"}},
                    failed_authentication_delay_ms=0)
    seen = []
    server.register_handler(DESCRIBE_CLUSTER, lambda ctx: (seen.append(str(ctx.principal)), {
        "error_code": 0, "error_message": None, "cluster_id": "kc", "controller_id": 0,
        "brokers": [], "cluster_authorized_operations": 0})[1], 0, 1)
    server.start()
    server.seen_principals = seen
    try:
        yield server, server.bound_port("SASL_PLAINTEXT")
    finally:
        server.shutdown()


def kchannel_oauth_configs(**options):
    opts = " ".join(f'{k}="{v}"' for k, v in options.items())
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f"{LOGIN_MODULE} required {opts};"}


def test_kchannel_client_and_server_end_to_end(oauth_server):
    from kchannel.client import KafkaClient
    server, port = oauth_server
    with KafkaClient(kchannel_oauth_configs(unsecuredLoginStringClaim_sub="alice",
                                            unsecuredLoginListClaim_scope=",read,write",
                                            unsecuredLoginExtension_traceId="e2e")) as c:
        c.connect("127.0.0.1", port)
        assert c.request(DESCRIBE_CLUSTER, {}, version=0)["cluster_id"] == "kc"
    assert server.seen_principals == ["User:alice"]


@pytest.mark.parametrize("options,expected", [
    ({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginListClaim_scope": ",write"},
     '{"status":"insufficient_scope", "scope":"[read]"}'),
    ({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginListClaim_scope": ",read",
      "unsecuredLoginLifetimeSeconds": "-60"},
     '{"status":"invalid_token"}'),
])
def test_refused_token_error_json_reaches_client(oauth_server, options, expected):
    from kchannel.client import KafkaClient
    server, port = oauth_server
    c = KafkaClient(kchannel_oauth_configs(**options))
    with pytest.raises(SaslAuthenticationError) as info:
        c.connect("127.0.0.1", port)
    c.close()
    assert expected in str(info.value)
    assert server.seen_principals == []


@pytest.mark.slow
@pytest.mark.interop
def test_librdkafka_unsecured_jwt_end_to_end(oauth_server):
    """librdkafka builds its own unsecured JWT (enable.sasl.oauthbearer.unsecure.jwt)."""
    confluent_kafka = require_module("confluent_kafka", "confluent-kafka")
    from confluent_kafka.admin import AdminClient
    server, port = oauth_server
    errors = []

    def list_topics(scope, timeout):
        admin = AdminClient({
            "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal=carol scope={scope} extension_traceId=rdk",
            "error_cb": errors.append})
        try:
            return admin.list_topics(timeout=timeout)
        finally:
            admin.poll(0.5)

    md = list_topics("read", 15)
    assert md.brokers and errors == []
    with pytest.raises(confluent_kafka.KafkaException):
        list_topics("write", 3)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION
               and "insufficient_scope" in e.str() for e in errors), errors


@pytest.mark.slow
@pytest.mark.interop
def test_kafka_python_end_to_end(oauth_server):
    kafka = require_module("kafka", "kafka-python")
    oauth = pytest.importorskip("kafka.net.sasl.oauth", reason="kafka-python 3.x not installed")
    from kchannel.utils import now_ms
    server, port = oauth_server

    class Provider(oauth.AbstractTokenProvider):
        def token(self):
            return UnsecuredLogin({"unsecuredLoginStringClaim_sub": "dave",
                                   "unsecuredLoginStringClaim_scope": "read"}).token(now_ms()).value

    admin = kafka.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider(),
        bootstrap_timeout_ms=15000)
    try:
        assert admin.describe_cluster()["cluster_id"] == "kc"
    finally:
        admin.close()
    assert server.seen_principals == ["User:dave"]


# -- signed JWTs against a JWKS (KIP-768 validator) ---------------------------------------------

JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def _b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64u(value, size=None):
    size = size or (value.bit_length() + 7) // 8
    return _b64u(value.to_bytes(size, "big"))


@pytest.fixture(scope="module")
def signing_keys():
    pytest.importorskip("cryptography", reason="cryptography is not installed")
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rn = rsa_key.public_key().public_numbers()
    en = ec_key.public_key().public_numbers()
    jwks = {"keys": [
        {"kty": "RSA", "kid": "r1", "use": "sig", "n": _int_b64u(rn.n), "e": _int_b64u(rn.e)},
        {"kty": "EC", "kid": "e1", "crv": "P-256", "x": _int_b64u(en.x, 32),
         "y": _int_b64u(en.y, 32)},
    ]}
    return {"r1": rsa_key, "e1": ec_key, "other": other, "jwks": jwks}


def sign_jwt(keys, claims, alg="RS256", kid="r1", key=None):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    header = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = f"{_b64u(json.dumps(header).encode())}.{_b64u(json.dumps(claims).encode())}"
    key = key or keys[kid or "r1"]
    digest = hashes.SHA256()
    if alg == "RS256":
        sig = key.sign(signing_input.encode(), padding.PKCS1v15(), digest)
    elif alg == "PS256":
        sig = key.sign(signing_input.encode(),
                       padding.PSS(mgf=padding.MGF1(digest), salt_length=32), digest)
    else:
        r, s_ = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(digest)))
        sig = r.to_bytes(32, "big") + s_.to_bytes(32, "big")
    return f"{signing_input}.{_b64u(sig)}"


def jwt_claims(**extra):
    claims = {"sub": "erin", "iat": NOW // 1000, "exp": NOW // 1000 + 600,
              "scope": "kafka"}
    claims.update(extra)
    return {k: v for k, v in claims.items() if v is not None}


def jwks_server(keys, tmp_path, **configs):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(keys["jwks"]))
    return bearer_server(configs={"sasl.server.callback.handler.class": JWKS_HANDLER,
                                  "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(), **configs})


@pytest.mark.parametrize("alg,kid", [("RS256", "r1"), ("PS256", "r1"), ("ES256", "e1")])
def test_jwks_validator_accepts_signed_token(signing_keys, tmp_path, alg, kid):
    s = jwks_server(signing_keys, tmp_path)
    token = sign_jwt(signing_keys, jwt_claims(), alg=alg, kid=kid)
    assert s.evaluate_response(initial(token, {"traceId": "x"}), NOW) == b""
    assert s.get_authorization_id() == "erin"
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") == (NOW // 1000 + 600) * 1000
    assert s.get_negotiated_property("OAUTHBEARER.token").scope == {"kafka"}
    assert s.get_negotiated_property("traceId") == "x"


@pytest.mark.parametrize("make", [
    lambda k: sign_jwt(k, jwt_claims(), key=k["other"]),                 # wrong key
    lambda k: sign_jwt(k, jwt_claims(), kid="nope", key=k["r1"]),        # unknown kid
    lambda k: unsecured(jwt_claims()),                                   # alg none
    lambda k: sign_jwt(k, jwt_claims(exp=NOW // 1000 - 31)),             # expired past skew
    lambda k: sign_jwt(k, jwt_claims(iat=None)),                         # iat required
    lambda k: sign_jwt(k, jwt_claims(aud="kafka")),                      # aud not expected
    lambda k: sign_jwt(k, jwt_claims(sub=" ")),                          # blank subject
    lambda k: sign_jwt(k, jwt_claims(scope=["a", "a"])),                 # duplicate scope
    lambda k: sign_jwt(k, jwt_claims(nbf=NOW // 1000 + 3600)),           # not yet valid
    lambda k: sign_jwt(k, jwt_claims())[:-4] + "AAAA",                   # tampered signature
    lambda k: "a.b",
], ids=["wrong-key", "unknown-kid", "alg-none", "expired", "no-iat", "aud", "blank-sub",
        "dup-scope", "nbf", "tampered", "two-parts"])
def test_jwks_validator_refuses(signing_keys, tmp_path, make):
    s = jwks_server(signing_keys, tmp_path)
    assert s.evaluate_response(initial(make(signing_keys)), NOW) == b'{"status":"invalid_token"}'
    assert not s.is_complete()


def test_jwks_validator_clock_skew_audience_issuer(signing_keys, tmp_path):
    s = jwks_server(signing_keys, tmp_path)
    assert s.evaluate_response(initial(sign_jwt(signing_keys, jwt_claims(
        exp=NOW // 1000 - 29))), NOW) == b""                # within the 30 s default skew
    s = jwks_server(signing_keys, tmp_path, **{
        "sasl.oauthbearer.expected.audience": "kafka,other",
        "sasl.oauthbearer.expected.issuer": "https://idp",
        "sasl.oauthbearer.sub.claim.name": "client_id"})
    good = jwt_claims(aud=["kafka"], iss="https://idp", client_id="svc")
    assert s.evaluate_response(initial(sign_jwt(signing_keys, good)), NOW) == b""
    assert s.get_authorization_id() == "svc"
    for bad in (dict(good, iss="https://evil"), dict(good, aud="nope")):
        s = jwks_server(signing_keys, tmp_path, **{
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp"})
        assert s.evaluate_response(initial(sign_jwt(signing_keys, bad)), NOW).startswith(
            b'{"status":"invalid_token"')


@pytest.mark.slow
@pytest.mark.interop
def test_librdkafka_signed_token_end_to_end(signing_keys, tmp_path):
    """librdkafka hands a signed JWT from its oauth_cb to a JWKS-validating listener."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka not installed")
    from confluent_kafka.admin import AdminClient

    from kchannel.server import Server
    from kchannel.utils import now_ms
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(signing_keys["jwks"]))
    srv = Server(listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                 listener_configs={"SASL_PLAINTEXT": {
                     "sasl.enabled.mechanisms": "OAUTHBEARER",
                     "sasl.server.callback.handler.class": JWKS_HANDLER,
                     "sasl.oauthbearer.jwks.endpoint.url": path.as_uri()}},
                 failed_authentication_delay_ms=0)
    srv.start()
    try:
        port = srv.bound_port("SASL_PLAINTEXT")
        now = now_ms()
        token = sign_jwt(signing_keys, {"sub": "frank", "iat": now // 1000,
                                        "exp": now // 1000 + 600})
        errors = []
        admin = AdminClient({
            "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "error_cb": errors.append,
            "oauth_cb": lambda config: (token, now / 1000 + 600, "frank", {})})
        md = admin.list_topics(timeout=15)
        assert md.brokers and errors == []
    finally:
        srv.shutdown()


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789-_=+/", max_size=40), min_size=1, max_size=4))
def test_jwks_validator_arbitrary_tokens_fail_closed(parts):
    from kchannel.security.sasl.oauthbearer import JwtValidator
    validator = JwtValidator(jwks={"keys": [{"kty": "RSA", "kid": "k", "n": "AQAB", "e": "AQAB"}]})
    s = bearer_server(callbacks=ServerCallbacks(oauth_validate=validator.validate))
    try:
        challenge = s.evaluate_response(initial(".".join(parts) or "x"), NOW)
    except SaslAuthenticationError:
        return
    assert challenge == b'{"status":"invalid_token"}' and not s.is_complete()
