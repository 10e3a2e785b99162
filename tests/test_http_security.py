"""Who can reach `mcpdebug serve`: the HTTP bearer token, remote binds, Host/Origin checks, --read-only.

Real `mcpdebug serve --http` processes on port 0, raw HTTP requests (httpx2, what the SDK's client
uses) and the SDK's streamable HTTP client sending the header a user would configure.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.types import CallToolResult

from conftest import MCPDEBUG, RunningServer, start_server
from helpers import http_client, wait_for
from mcpdebug import cli, http_auth
from mcpdebug.app import build_server
from mcpdebug.store import Store
from mcpdebug.tools.annotations import READ_ONLY, RUNS_CODE

RUNS_CODE_TOOLS = {
    "run_tests",
    "detect_hang",
    "evaluate_expression",
    "continue_execution",
    "close_session",
    "trace_test",
    "localize",
    "start_process",
    "control_process",
    "send_stdin",
    # debug sessions: what starts, steps or stops a debuggee, or runs code in it (conditions, watches)
    "create_debug_session",
    "start_debugging",
    "close_debug_session",
    "set_breakpoint",
    "remove_breakpoint",
    "toggle_breakpoint",
    "set_exception_breakpoints",
    "step_over",
    "step_into",
    "step_out",
    "pause_execution",
    "add_watch",
    "remove_watch",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def post(url: str, headers: dict[str, str], verify: ssl.SSLContext | bool = True) -> httpx2.Response:
    return httpx2.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, verify=verify, timeout=10)


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)  # an exception group (a backport on Python 3.10)
    return [leaf for one in inner for leaf in leaves(one)] if inner else [exc]


def startup_log(server: RunningServer) -> str:
    """The server's log once it has printed its start-up lines (just after it writes server.json)."""
    return str(wait_for(lambda: "Claude Code:" in (log := server.log.read_text()) and log, timeout=20))


def refusals(server: RunningServer) -> list[str]:
    return [line for line in server.log.read_text().splitlines() if "mcpdebug.http: refused" in line]


@pytest.fixture
def http_server(tmp_path: Path) -> Any:
    running = start_server(tmp_path / ".mcpdebug")
    yield running
    running.stop()


@pytest.mark.anyio
async def test_every_request_needs_the_bearer_token(http_server: RunningServer) -> None:
    server = http_server
    info_file = server.directory / "server.json"
    assert stat.S_IMODE(info_file.stat().st_mode) == 0o600
    info = json.loads(info_file.read_text())
    token, url = info["mcp_token"], info["mcp_url"]
    assert len(token) >= 32 and url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert info["token"] != token, "the ingest token and the MCP token are separate secrets"

    # the start-up lines say how to configure a client
    log = startup_log(server)
    assert f"MCP (streamable HTTP) at {url}" in log
    assert f'"Authorization: Bearer {token}" (the token is kept in {info_file} as mcp_token)' in log
    assert f'claude mcp add --transport http mcpdebug {url} --header "Authorization: Bearer {token}"' in log

    missing = post(url, {})
    assert missing.status_code == 401
    assert "Authorization: Bearer <token>" in missing.json()["error_description"]
    assert missing.headers["www-authenticate"].startswith("Bearer ")
    wrong = "x" * 43
    assert post(url, {"Authorization": f"Bearer {wrong}"}).status_code == 401
    assert post(url, {"Authorization": f"Basic {token}"}).status_code == 401
    assert httpx2.get(url, timeout=10).status_code == 401
    assert httpx2.delete(url, timeout=10).status_code == 401
    assert post(url, {"Authorization": f"Bearer {token}"}).status_code == 200

    # the SDK's client without the header is refused; with it, it works
    with pytest.raises(BaseException) as refused:
        async with Client(url):
            pass
    assert any("error response" in str(leaf) for leaf in leaves(refused.value))
    async with http_client(url, token) as client:
        listed = await client.call_tool("enable_tools", {"groups": ["all"]})  # the core set at first
        assert not listed.is_error and "debug" in (listed.structured_content or {})["groups"]
        assert {t.name for t in (await client.list_tools()).tools} >= RUNS_CODE_TOOLS
        reply = await client.call_tool("list_sessions", {})
        assert not reply.is_error and "No sessions recorded" in text(reply)

    lines = refusals(server)
    assert any("POST /mcp without a bearer token" in line for line in lines)
    assert any("POST /mcp with a wrong bearer token" in line for line in lines)
    assert any("GET /mcp without a bearer token" in line for line in lines)
    assert not any(token in line or wrong in line for line in lines), "a refusal logged a token"

    # Host and Origin are still checked (DNS rebinding), behind the token
    authorized = {"Authorization": f"Bearer {token}"}
    assert post(url, {**authorized, "Host": "rebind.example:80"}).status_code == 421
    assert post(url, {**authorized, "Origin": "http://rebind.example"}).status_code == 403
    assert post(url, {**authorized, "Origin": "http://localhost:3000"}).status_code == 200


@pytest.mark.anyio
async def test_read_only_server_over_http_with_the_token_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "env-token-0123456789abcdef"
    monkeypatch.setenv(http_auth.TOKEN_ENV, token)
    server = start_server(tmp_path / ".mcpdebug", "--read-only", "--tools", "all")
    try:
        assert server.mcp_token == token
        assert "(the token of $MCPDEBUG_HTTP_TOKEN)" in startup_log(server)
        async with http_client(server.mcp_url, token) as client:
            tools = (await client.list_tools()).tools
            assert tools and not {t.name for t in tools} & RUNS_CODE_TOOLS
            assert all(t.annotations and t.annotations.read_only_hint for t in tools)
            refused = await client.call_tool("run_tests", {"args": ["-x"]})
            assert refused.is_error
            assert "run_tests is not offered: this server is read-only" in text(refused)
            hang = await client.call_tool("detect_hang", {"command": "python -c 'while True: pass'"})
            assert hang.is_error and "read-only" in text(hang)
            assert not (await client.call_tool("list_sessions", {})).is_error
        withheld = next(line for line in server.log.read_text().splitlines() if "read-only: " in line)
        assert all(name in withheld for name in RUNS_CODE_TOOLS), withheld
    finally:
        server.stop()


@pytest.mark.anyio
async def test_the_read_only_rule_follows_the_annotation(tmp_path: Path) -> None:
    store = Store(tmp_path / ".mcpdebug")

    async with Client(build_server(store)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    runs_code = {name for name, t in tools.items() if not (t.annotations and t.annotations.read_only_hint)}
    assert runs_code == RUNS_CODE_TOOLS
    for name in runs_code:
        first = (tools[name].description or "").splitlines()[0]
        assert first.startswith(("[Runs code on this machine] ", "[Changes a running test process] ")), name
    assert tools["run_tests"].annotations is not None and tools["run_tests"].annotations.destructive_hint

    # a tool added later is classified by its annotation alone; none at all counts as running code
    def shell(command: str) -> str:
        """Run a shell command."""
        return command

    def peek() -> str:
        """Read something stored."""
        return "stored"

    server = build_server(store, read_only=True)
    server.add_tool(shell, annotations=RUNS_CODE)
    server.add_tool(shell, name="unannotated")
    server.add_tool(peek, annotations=READ_ONLY)
    async with Client(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "peek" in names and not names & {"shell", "unannotated", *RUNS_CODE_TOOLS}
        reply = await client.call_tool("unannotated", {"command": "id"})
        assert reply.is_error and "read-only" in text(reply)


def test_a_remote_bind_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [MCPDEBUG, "serve", "--http", "--host", "0.0.0.0", "--port", "0", "--dir", str(tmp_path / ".m")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("mcpdebug serve: refusing to serve MCP on 0.0.0.0, which other machines")
    assert "--allow-remote with --tls-cert and --tls-key" in done.stderr
    assert not (tmp_path / ".m").exists(), "nothing is created before the refusal"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--http", "--host", "0.0.0.0", "--allow-remote"], "needs --tls-cert and --tls-key"),
        (["--http", "--token", "short"], "must be at least 16 characters"),
        (["--http", "--token", "has spaces in it, sixteen+"], "must be at least 16 characters"),
        (["--http", "--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
        (["--http", "--tls-cert", "no.pem", "--tls-key", "no.pem"], "cannot load the TLS certificate"),
        (["--token", "0123456789abcdef0123"], "--token applies to --http only"),
    ],
)
def test_other_refusals_say_what_to_change(
    flags: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", "--dir", str(tmp_path / ".m"), *flags]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mcpdebug serve: ") and says in err


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for this machine's names and 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = f"DNS:localhost,DNS:{socket.gethostname()},IP:127.0.0.1"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=t"),
            *("-keyout", str(key), "-out", str(cert), "-addext", f"subjectAltName={names}"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.anyio
async def test_remote_bind_with_tls_keeps_token_host_and_origin_checks(
    tmp_path: Path, tls_files: tuple[Path, Path]
) -> None:
    cert, key = tls_files
    token = "given-token-0123456789abcdef"
    flags = ["--host", "0.0.0.0", "--allow-remote", "--tls-cert", str(cert), "--tls-key", str(key)]
    server = start_server(tmp_path / ".mcpdebug", *flags, "--token", token, "--allowed-host", "ci.example")
    trust = ssl.create_default_context(cafile=str(cert))
    try:
        assert server.mcp_url.startswith(f"https://{socket.gethostname()}:")
        port = server.mcp_url.rsplit(":", 1)[1].removesuffix("/mcp")
        url = f"https://127.0.0.1:{port}/mcp"
        authorized = {"Authorization": f"Bearer {token}"}
        assert post(url, {}, trust).status_code == 401
        assert post(url, authorized, trust).status_code == 200
        assert post(url, {**authorized, "Host": f"ci.example:{port}"}, trust).status_code == 200
        assert post(url, {**authorized, "Host": "rebind.example"}, trust).status_code == 421
        assert post(url, {**authorized, "Origin": "https://rebind.example"}, trust).status_code == 403
        assert post(url, {**authorized, "Origin": f"https://ci.example:{port}"}, trust).status_code == 200
        with pytest.raises(httpx2.HTTPError):  # no clear-text HTTP on a TLS port
            httpx2.post(f"http://127.0.0.1:{port}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=10)
        async with http_client(url, token, verify=trust) as client:
            reply = await client.call_tool("list_sessions", {})
            assert not reply.is_error
        assert "remote clients may reach MCP as" in startup_log(server)
    finally:
        server.stop()
