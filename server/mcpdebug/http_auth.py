"""Who may reach `mcpdebug serve --http`: holders of its bearer token, on loopback unless told otherwise.

The tools run code (`run_tests`, `detect_hang`, `evaluate_expression`), so the HTTP endpoint is at
least as guarded as the ingest WebSocket:

- every request carries ``Authorization: Bearer <token>``, checked by the MCP SDK's own bearer
  middleware through `StaticTokenVerifier`; a refusal is a 401, logged without the token;
- a bind address other than loopback is refused unless ``--allow-remote``, and then only with TLS,
  so the token never crosses a network in clear text;
- Host and Origin are checked for every bind address (DNS rebinding), not only for loopback as the
  SDK does by default.

Everything here is decided before the store is opened: a refusal is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `serve` over stdio (and its flags' checks) never loads them
    from mcp.server.auth.provider import AccessToken
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("mcpdebug.http")

TOKEN_ENV = "MCPDEBUG_HTTP_TOKEN"
MIN_TOKEN_LENGTH = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~+/-]+=*")  # RFC 6750 b64token: safe in a header and a shell
_WILDCARDS = ("0.0.0.0", "::", "")


class HttpConfigError(Exception):
    """A refused HTTP configuration; the message is the one line the user sees."""


@dataclass(frozen=True)
class HttpSecurity:
    """The resolved guard of the HTTP endpoint."""

    token: str
    token_source: str  # "generated", "--token" or "$MCPDEBUG_HTTP_TOKEN"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    allowed_hosts: tuple[str, ...] = ()

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert is not None else "http"


def resolve(
    *,
    host: str,
    allow_remote: bool,
    token: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    allowed_hosts: Sequence[str] = (),
    env: Mapping[str, str],
) -> HttpSecurity:
    """The guard from the serve flags and the environment, or `HttpConfigError` saying what to change."""
    if not is_loopback(host):
        if not allow_remote:
            raise HttpConfigError(
                f"refusing to serve MCP on {host}, which other machines can reach: its tools run code. "
                "Keep the default --host 127.0.0.1, or pass --allow-remote with --tls-cert and --tls-key"
            )
        if not (tls_cert and tls_key):
            raise HttpConfigError(
                f"--allow-remote on {host} needs --tls-cert and --tls-key: "
                "the bearer token must not cross the network in clear text"
            )
    if bool(tls_cert) != bool(tls_key):
        raise HttpConfigError("--tls-cert and --tls-key go together: give both files (PEM)")
    cert = key = None
    if tls_cert and tls_key:
        cert, key = Path(tls_cert).expanduser().resolve(), Path(tls_key).expanduser().resolve()
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
            raise HttpConfigError(
                f"cannot load the TLS certificate {cert} with key {key}: {reason}"
            ) from None
    if token is not None:
        source = "--token"
    elif env.get(TOKEN_ENV):
        token, source = env[TOKEN_ENV], f"${TOKEN_ENV}"
    else:
        token, source = secrets.token_urlsafe(32), "generated"
    if len(token) < MIN_TOKEN_LENGTH or not _TOKEN_CHARS.fullmatch(token):
        raise HttpConfigError(
            f"the token of {source} must be at least {MIN_TOKEN_LENGTH} characters of "
            "A-Z a-z 0-9 . _ ~ + / - (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return HttpSecurity(token, source, cert, key, tuple(allowed_hosts))


def from_serve_args(args: argparse.Namespace) -> HttpSecurity | None:
    """The HTTP endpoint's guard; the HTTP-only flags without --http are a mistake worth saying."""
    if not args.http:
        given = [
            flag
            for flag, value in (
                ("--token", args.token),
                ("--allow-remote", args.allow_remote),
                ("--tls-cert", args.tls_cert),
                ("--tls-key", args.tls_key),
                ("--allowed-host", args.allowed_host),
            )
            if value
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise HttpConfigError(f"{', '.join(given)} {verb} to --http only (stdio needs no token)")
        return None
    return resolve(
        host=args.host,
        allow_remote=args.allow_remote,
        token=args.token,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        allowed_hosts=args.allowed_host,
        env=os.environ,
    )


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and names (localhost) that resolve only to those."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in found)


class StaticTokenVerifier:
    """The SDK's `TokenVerifier` for one static token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="mcpdebug", scopes=[])
        return None


def transport_security(host: str, security: HttpSecurity) -> TransportSecuritySettings:
    """Host and Origin checks for any bind address: the names this server is reached by, and no other.

    The SDK checks them only when bound to loopback; bound elsewhere (or to every interface), the
    legitimate names are this machine's names and addresses plus ``--allowed-host``.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    local = {"127.0.0.1", "localhost", "[::1]"}
    names = {*local, *security.allowed_hosts}
    names |= _machine_names(host) if not is_loopback(host) else {_bracket(host)}
    hosts = sorted(names | {f"{name}:*" for name in names})
    pages = {(security.scheme, name) for name in names} | {("http", name) for name in local}
    origins = sorted(f"{scheme}://{name}{port}" for scheme, name in pages for port in ("", ":*"))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _machine_names(host: str) -> set[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    if host not in _WILDCARDS:
        names.add(_bracket(host))
    else:
        try:
            infos = socket.getaddrinfo(socket.gethostname(), None)
        except OSError:
            infos = []
        names |= {_bracket(str(info[4][0]).split("%")[0]) for info in infos}
        names |= {_bracket(address) for address in _routed_addresses()}
    return {name for name in names if name}


def _routed_addresses() -> set[str]:
    """This machine's addresses on its default routes (the hostname often resolves to loopback only).

    Connecting a UDP socket sends nothing: it only asks the kernel which source address it would use.
    """
    found = set()
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect((probe, 9))
                found.add(str(sock.getsockname()[0]))
        except OSError:
            continue
    return found


def _bracket(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def public_url(host: str, port: int, security: HttpSecurity) -> str:
    """The URL a client uses: the bind address, or this machine's name for a wildcard bind."""
    name = socket.gethostname() if host in _WILDCARDS else _bracket(host)
    return f"{security.scheme}://{name}:{port}/mcp"


def client_help(url: str, security: HttpSecurity, kept_in: Path | None) -> list[str]:
    """The start-up lines: where MCP is, the header every request needs, and a ready client command."""
    header = f"Authorization: Bearer {security.token}"
    if security.token_source != "generated":
        where = f"the token of {security.token_source}"
    elif kept_in is not None:
        where = f"the token is kept in {kept_in} as mcp_token"
    else:
        where = "a new token at each start; pass --token to keep one"
    return [
        f"mcpdebug: MCP (streamable HTTP) at {url}",
        f'mcpdebug: every request needs the header "{header}" ({where})',
        f'mcpdebug: Claude Code: claude mcp add --transport http mcpdebug {url} --header "{header}"',
    ]


class RefusalLog:
    """ASGI wrapper: each request the SDK refuses with 401 is logged (peer, method, path, why; never the
    token) and answered with a body that says how to authenticate."""

    BODY = json.dumps(
        {
            "error": "invalid_token",
            "error_description": "mcpdebug: send the header 'Authorization: Bearer <token>'; the token is "
            "printed when `mcpdebug serve --http` starts and kept in .mcpdebug/server.json (mcp_token)",
        }
    ).encode()

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = False

        async def watch(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 401:
                refused = True
                self._log(scope)
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(self.BODY)).encode()))
                await send({**message, "headers": headers})
            elif refused and message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": self.BODY})
            else:
                await send(message)

        await self.app(scope, receive, watch)

    @staticmethod
    def _log(scope: Scope) -> None:
        from starlette.datastructures import Headers

        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else "?"
        given = "authorization" in Headers(scope=scope)
        log.warning(
            "refused %s: %s %s %s",
            peer,
            scope.get("method", "?"),
            scope.get("path", "?"),
            "with a wrong bearer token" if given else "without a bearer token",
        )
