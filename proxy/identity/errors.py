"""The identity layer's errors: an identity provider whose keys cannot be had (503), and a
token that lacks a scope the resource needs (403); a bad token is `Unauthenticated` (401)."""

from __future__ import annotations

from proxy.errors import ApiError, Forbidden


class ProviderUnavailable(ApiError):
    """The token names a trusted issuer whose key set this replica holds no usable copy of,
    and the provider cannot be reached now: the token may be perfectly good, and a retry may
    succeed once the provider answers (so not a 401, which tells a client to drop its token)."""

    code = "identity_provider_unavailable"
    http_status = 503


class InsufficientScope(Forbidden):
    """A valid token without the scope this resource needs (RFC 6750 `insufficient_scope`)."""

    code = "insufficient_scope"
