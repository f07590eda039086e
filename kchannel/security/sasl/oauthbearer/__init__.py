"""SASL OAUTHBEARER (RFC 7628, KIP-255) client and server mechanisms.

Mirrors Kafka's ``OAuthBearerSaslClient`` / ``OAuthBearerSaslServer`` and the
development-only unsecured JWS tokens of ``OAuthBearerUnsecuredJws``,
``OAuthBearerUnsecuredLoginCallbackHandler`` (client) and
``OAuthBearerUnsecuredValidatorCallbackHandler`` (server).

Token flow::

    client                                        server
    n,[a=<authzid>],^Aauth=Bearer <token>[^Akey=value...]^A^A  ->
                                 <-   b""  (valid token: complete)
                              or <-   {"status":"invalid_token"}  (error JSON)
    ^A                           ->   (client acknowledges the error)
                                 <-   SaslAuthenticationError(<the JSON>)

Extensions are validated by the server's validator: an extension it marks
invalid fails the authentication with Kafka's message; one it neither
validates nor rejects is ignored (not exposed as a negotiated property).
The unsecured validator accepts every extension, as Kafka's does.

Signed tokens (KIP-768): ``sasl.server.callback.handler.class=
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``
selects :class:`JwtValidator`, which checks RS/PS/ES signatures against the
JWKS at ``sasl.oauthbearer.jwks.endpoint.url`` and the claims as Kafka does.

Real deployments can also plug their own validator in: ``ServerCallbacks.oauth_validate
(token_str, now) -> OAuthBearerToken`` (raise :class:`OAuthBearerValidationError`
for a refused token), or ``sasl.server.callback.handler.class`` naming a
Python class (dotted path) with ``validate(token_str, now)`` and optionally
``validate_extensions(token, extensions) -> (valid: dict, invalid: dict)`` and
``configure(configs, mechanism, jaas_options)``.  On the client,
``sasl.login.callback.handler.class`` names a class with ``token(now) ->
OAuthBearerToken`` and optionally ``extensions() -> dict``.

The package keeps the four concerns apart, as Kafka's oauthbearer packages do:
``token`` (tokens and errors), ``validation`` (validation utilities and the
unsecured validator), ``jwks`` (signed JWTs against a JWKS), ``login`` (the
unsecured login), with ``messages`` (the RFC 7628 messages) and ``mechanism``
(the SASL client and server).  Every name is re-exported here, so
``kchannel.security.sasl.oauthbearer`` imports as it did when it was one module.
"""
from kchannel.security.sasl.oauthbearer.messages import (  # noqa: F401
    MECHANISM, SEPARATOR, BYTE_CONTROL_A, AUTH_KEY, NEGOTIATED_PROPERTY_KEY_TOKEN,
    INTERNAL_ERROR_ON_SERVER, GENERIC_FAILURE_MESSAGE, SERVER_CALLBACK_HANDLER_CLASS,
    LOGIN_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_VALIDATOR, _JAVA_UNSECURED_LOGIN,
    _SASLNAME, _KEY, _VALUE, _KVPAIRS, _AUTH_PATTERN, _CLIENT_INITIAL_RESPONSE_PATTERN,
    EXTENSION_KEY_PATTERN, EXTENSION_VALUE_PATTERN, _ResponseError, validate_extensions,
    ClientInitialResponse, json_error_response)
from kchannel.security.sasl.oauthbearer.token import (  # noqa: F401
    OAuthBearerConfigError, OAuthBearerValidationError, java_double_to_string,
    _java_string_hash, _java_bucket, java_hashmap_order, _java_hashmap, _JAVA_DOUBLE,
    _b64url_nopad, OAuthBearerToken, OAuthBearerIllegalTokenError, _java_type_name,
    _json_as_text, _convert, _reject_constant, _b64decode, _to_map, _is_blank,
    OAuthBearerUnsecuredJws, _LONG_MAX, _LONG_MIN, _seconds_to_ms)
from kchannel.security.sasl.oauthbearer.validation import (  # noqa: F401
    _SCOPE_ITEM_PATTERN, parse_scope, _java_list, _fmt_f, validate_issued_at,
    validate_expiration_time, validate_time_consistency, validate_scope, _options,
    UnsecuredValidator)
from kchannel.security.sasl.oauthbearer.login import (  # noqa: F401
    UnsecuredLogin)
from kchannel.security.sasl.oauthbearer.jwks import (  # noqa: F401
    JWKS_ENDPOINT_URL, JWKS_ENDPOINT_REFRESH_MS, EXPECTED_AUDIENCE, EXPECTED_ISSUER,
    SCOPE_CLAIM_NAME, SUB_CLAIM_NAME, CLOCK_SKEW_SECONDS, _JAVA_JWKS_VALIDATOR,
    ValidateError, _b64url_decode, _b64url_int, _cfg, JwtValidator)
from kchannel.security.sasl.oauthbearer.mechanism import (  # noqa: F401
    log, _load_class, _handler, OAuthBearerSaslClient, OAuthBearerSaslServer,
    _CallbackValidator, create_client, create_server)
