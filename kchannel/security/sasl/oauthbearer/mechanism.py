"""The OAUTHBEARER SASL client and server mechanisms (Kafka's
``OAuthBearerSaslClient`` / ``OAuthBearerSaslServer``), the pluggable
login and validator handlers, and ``create_client`` / ``create_server``."""
import importlib

from kchannel.config.types import reveal
from kchannel.errors import ConfigError, SaslAuthenticationError
from kchannel.security.sasl.interfaces import (
    CREDENTIAL_LIFETIME_MS, SaslClientMechanism, SaslServerMechanism)
from kchannel.utils import now_ms, run_blocking
from kchannel.security.sasl.oauthbearer.messages import (
    BYTE_CONTROL_A, ClientInitialResponse, GENERIC_FAILURE_MESSAGE,
    INTERNAL_ERROR_ON_SERVER, LOGIN_CALLBACK_HANDLER_CLASS, MECHANISM,
    NEGOTIATED_PROPERTY_KEY_TOKEN, SERVER_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_LOGIN,
    _JAVA_UNSECURED_VALIDATOR, _ResponseError, json_error_response)
from kchannel.security.sasl.oauthbearer.token import OAuthBearerValidationError
from kchannel.security.sasl.oauthbearer.validation import UnsecuredValidator, _options
from kchannel.security.sasl.oauthbearer.login import UnsecuredLogin
from kchannel.security.sasl.oauthbearer.jwks import JwtValidator, _JAVA_JWKS_VALIDATOR
from kchannel.log import get_logger

# One logger for the whole mechanism, as before the split.
log = get_logger("kchannel.security.sasl.oauthbearer")


def _load_class(dotted, key):
    module_name, _, cls_name = (dotted or "").rpartition(".")
    if not module_name:
        raise ConfigError(f"{key} must be a Python dotted path, got {dotted!r}",
                          key=key, value=dotted)
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"Cannot load {key} {dotted}: {exc}", key=key, value=dotted) from exc


def _handler(configs, key, java_default, default_cls, jaas_options):
    configs = configs or {}
    # Broker configs name the handler per mechanism
    # (``[listener.name.<l>.]oauthbearer.sasl.server.callback.handler.class``);
    # the listener prefix is resolved by the channel builder.
    dotted = reveal(configs.get(f"{MECHANISM.lower()}.{key}", configs.get(key)))
    if dotted is None or dotted == java_default:
        return default_cls(jaas_options)
    if dotted == _JAVA_JWKS_VALIDATOR or dotted == f"{__name__}.JwtValidator":
        return JwtValidator(configs, jaas_options)
    if dotted.startswith("org.apache.kafka."):
        raise ConfigError(f"{key} {dotted} is a Java class; give a Python dotted path",
                          key=key, value=dotted)
    handler = _load_class(dotted, key)()
    if hasattr(handler, "configure"):
        handler.configure(dict(configs or {}), MECHANISM, _options(jaas_options))
    return handler


# -- client -------------------------------------------------------------------------------------

class OAuthBearerSaslClient(SaslClientMechanism):
    """Kafka's ``OAuthBearerSaslClient`` state machine."""

    mechanism_name = MECHANISM

    SEND_CLIENT_FIRST_MESSAGE = "SEND_CLIENT_FIRST_MESSAGE"
    RECEIVE_SERVER_FIRST_MESSAGE = "RECEIVE_SERVER_FIRST_MESSAGE"
    RECEIVE_SERVER_MESSAGE_AFTER_FAILURE = "RECEIVE_SERVER_MESSAGE_AFTER_FAILURE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    def __init__(self, token_provider, now=None, authorization_id=""):
        self._provider = token_provider
        self._now = now
        self._authorization_id = authorization_id or ""
        self._token = None
        self.state = self.SEND_CLIENT_FIRST_MESSAGE
        self.error_response = None

    def has_initial_response(self):
        return True

    def _set_state(self, state):
        log.debug("Setting SASL/%s client state to %s", MECHANISM, state)
        self.state = state

    def _failed(self, message, exc=None):
        self._set_state(self.FAILED)
        error = SaslAuthenticationError(message, mechanism=MECHANISM)
        if exc is not None:
            raise error from exc
        raise error

    def evaluate_challenge(self, challenge):
        challenge = bytes(challenge or b"")
        if self.state == self.SEND_CLIENT_FIRST_MESSAGE:
            if challenge:
                self._failed("Expected empty challenge")
            try:
                now = self._now
                if now is None:
                    now = now_ms()
                # A login handler may fetch its token over the network: on
                # an event loop that goes to an executor (run_blocking).
                self._token = run_blocking(self._provider.token, now)
                extensions = (self._provider.extensions()
                              if hasattr(self._provider, "extensions") else {})
                response = ClientInitialResponse(self._token.value, self._authorization_id,
                                                 extensions or {})
            except SaslAuthenticationError:
                self._set_state(self.FAILED)
                raise
            except Exception as exc:  # noqa: BLE001 - login handler failures
                self._failed(str(exc) or type(exc).__name__, exc)
            self._set_state(self.RECEIVE_SERVER_FIRST_MESSAGE)
            return response.to_bytes()
        if self.state == self.RECEIVE_SERVER_FIRST_MESSAGE:
            if challenge:
                self.error_response = challenge.decode("utf-8", errors="replace")
                log.debug("Sending %%x01 response to server after receiving an error: %s",
                          self.error_response)
                self._set_state(self.RECEIVE_SERVER_MESSAGE_AFTER_FAILURE)
                return BYTE_CONTROL_A
            log.debug("Successfully authenticated as %s", self._token.principal_name)
            self._set_state(self.COMPLETE)
            return None
        self._failed(f"Unexpected challenge in Sasl client state {self.state}")

    def is_complete(self):
        return self.state == self.COMPLETE

    def get_negotiated_property(self, name):
        if name == CREDENTIAL_LIFETIME_MS and self._token is not None and self.is_complete():
            return self._token.lifetime_ms
        return None

    def dispose(self):
        self._token = None


# -- server -------------------------------------------------------------------------------------

class OAuthBearerSaslServer(SaslServerMechanism):
    """Kafka's ``OAuthBearerSaslServer``.

    ``validator``: object with ``validate(token_str, now) -> OAuthBearerToken``
    (raising :class:`OAuthBearerValidationError` to refuse) and optionally
    ``validate_extensions(token, extensions) -> (valid, invalid)``.
    """

    mechanism_name = MECHANISM

    def __init__(self, validator):
        self._validator = validator
        self._complete = False
        self._token = None
        self._error_message = None
        self._extensions = {}

    def _fail(self, message, detail=None, exc=None):
        log.warning("OAUTHBEARER authentication failed: %s", detail or message)
        error = SaslAuthenticationError(message, mechanism=MECHANISM)
        error.detail = detail or message
        if exc is not None:
            raise error from exc
        raise error

    def evaluate_response(self, response, now=None):
        response = bytes(response or b"")
        if self._complete:
            self._fail(GENERIC_FAILURE_MESSAGE, "SASL authentication already complete")
        if response == BYTE_CONTROL_A and self._error_message is not None:
            log.debug("Received %%x01 response from client after it received our error")
            # Kafka fails with the error JSON itself as the message.
            self._fail(self._error_message)
        self._error_message = None
        try:
            client_response = ClientInitialResponse.parse(response)
        except _ResponseError as exc:
            self._fail(GENERIC_FAILURE_MESSAGE, str(exc))
        return self._process(client_response, now)

    def _process(self, client_response, now):
        if now is None:
            now = now_ms()
        try:
            token = self._validator.validate(client_response.token_value, now)
        except OAuthBearerValidationError as exc:
            self._error_message = json_error_response(exc.status, exc.scope,
                                                      exc.openid_configuration)
            log.debug("%s (%s)", self._error_message, exc.description)
            return self._error_message.encode("utf-8")
        except SaslAuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken validator fails closed
            self._fail(GENERIC_FAILURE_MESSAGE, f"{INTERNAL_ERROR_ON_SERVER}: {exc}", exc)
        if token is None:
            self._error_message = json_error_response("invalid_token")
            return self._error_message.encode("utf-8")
        authzid = client_response.authorization_id
        if authzid and authzid != token.principal_name:
            self._fail("Authentication failed: Client requested an authorization id "
                       f"({authzid}) that is different from the token's principal name "
                       f"({token.principal_name})")
        valid = self._process_extensions(token, client_response.extensions)
        self._token = token
        self._extensions = valid
        self._complete = True
        log.debug("Successfully authenticate User=%s", token.principal_name)
        return b""

    def _process_extensions(self, token, extensions):
        check = getattr(self._validator, "validate_extensions", None)
        if check is None:
            return {}      # no extension support: none are kept (as Kafka)
        try:
            valid, invalid = check(token, dict(extensions))
        except Exception as exc:  # noqa: BLE001
            self._fail(GENERIC_FAILURE_MESSAGE, f"{INTERNAL_ERROR_ON_SERVER}: {exc}", exc)
        if invalid:
            listing = "; ".join(f"{k}: {v}" for k, v in invalid.items())
            self._fail(f"Authentication failed: {len(invalid)} extensions are invalid! "
                       f"They are: {listing}")
        # Only extensions the client actually sent can be validated.
        return {k: extensions[k] for k in valid if k in extensions}

    def is_complete(self):
        return self._complete

    def get_authorization_id(self):
        if not self._complete:
            raise SaslAuthenticationError("Authentication exchange has not completed",
                                          mechanism=MECHANISM)
        return self._token.principal_name

    def get_negotiated_property(self, name):
        if not self._complete:
            return None
        if name == NEGOTIATED_PROPERTY_KEY_TOKEN:
            return self._token
        if name == CREDENTIAL_LIFETIME_MS:
            return self._token.lifetime_ms
        return self._extensions.get(name)

    @property
    def extensions(self):
        """Validated extensions (name -> value)."""
        return dict(self._extensions)

    def dispose(self):
        self._complete = False
        self._token = None
        self._extensions = {}


class _CallbackValidator:
    """Adapts ``ServerCallbacks.oauth_validate(token_str, now)``."""

    def __init__(self, fn, extensions_fn=None):
        self._fn = fn
        if extensions_fn is not None:
            self.validate_extensions = extensions_fn

    def validate(self, token_value, now):
        return self._fn(token_value, now)


# -- factories ------------------------------------------------------------------------------------

def create_client(mechanism=MECHANISM, *, jaas_options=None, configs=None, server_host=None,
                  **kw):
    provider = kw.get("token_provider")
    if provider is None:
        provider = _handler(configs, LOGIN_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_LOGIN,
                            UnsecuredLogin, jaas_options)
    return OAuthBearerSaslClient(provider, now=kw.get("now"),
                                 authorization_id=kw.get("authorization_id", ""))


def create_server(mechanism=MECHANISM, *, jaas_options=None, configs=None, callbacks=None,
                  server_host=None, now=None, **kw):
    validator = kw.get("validator")
    if validator is None and callbacks is not None and callbacks.oauth_validate is not None:
        validator = _CallbackValidator(callbacks.oauth_validate,
                                       callbacks.oauth_validate_extensions)
    if validator is None:
        validator = _handler(configs, SERVER_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_VALIDATOR,
                             UnsecuredValidator, jaas_options)
    return OAuthBearerSaslServer(validator)
