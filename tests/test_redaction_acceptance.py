"""Redaction end to end (issue 43): a failing test whose locals, message, source and output hold
credentials of every kind, run by an agent through a real `mcpdebug serve` (stdio) and read back with
`get_failure`, `get_output`, `mcpdebug failure`, the server's JSON log and the HTML report. Ordinary
names (``author``, ``passed``, ``tokens``) and the run's counts are shown; no secret is, anywhere."""

from __future__ import annotations

import html
import subprocess
from pathlib import Path

import anyio
import pytest
from log_schemas import read_log
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import MCPDEBUG
from helpers import FAST, recorded, run_inner
from mcpdebug.app import build_server

pytestmark = pytest.mark.anyio

DB_PASSWORD = "S3cretPassw0rd"
GITHUB = "ghp_" + "R2d2C3po" * 4 + "ab12"
AWS_ID = "AKIAQ3EGRIBKYEXAMPL3"
BEARER = "abc.def.ghi"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEiLCJhZG1pbiI6dHJ1ZX0.Zm9vYmFyYmF6cXV4"
GITLAB = "glpat-" + "Zx9" * 7
SLACK = "xoxb-123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GCP = "AIzaSyB" + "k9" * 16
PEM_BODY = "MIIEowIBAAKCAQEA7bq" + "Zm9vYmFy" * 8
API_KEY = "k-7f3a9c2e"
SECRETS = {
    "url password": DB_PASSWORD,
    "github": GITHUB,
    "aws key id": AWS_ID,
    "bearer": BEARER,
    "jwt": JWT,
    "gitlab": GITLAB,
    "slack": SLACK,
    "stripe": STRIPE,
    "gcp": GCP,
    "private key": PEM_BODY,
    "named api_key": API_KEY,
}

SUITE = f'''
import json

PEM = "-----BEGIN PRIVATE KEY-----\\n{PEM_BODY}\\n-----END PRIVATE KEY-----\\n"


def deploy(url, headers):
    return {{"status": 401, "url": url}}


def test_deploy():
    author = "ada"
    passed = 3
    tokens = ["a", "b"]
    compass = "north"
    max_passengers = 4
    oauth_scopes = ["repo"]
    db_url = "postgres://admin:{DB_PASSWORD}@db.example.com:5432/app"
    github = "{GITHUB}"
    aws = {{"region": "eu-west-1", "key_id": "{AWS_ID}"}}
    headers = {{"Authorization": "Bearer {BEARER}", "Accept": "application/json"}}
    session = "{JWT}"
    more = ["{GITLAB}", "{SLACK}", "{STRIPE}", "{GCP}"]
    service_account = json.dumps({{"type": "service_account", "private_key": PEM}})
    api_key = "{API_KEY}"
    print(f"deploying with {{github}} to {{db_url}}; headers={{headers}}")
    reply = deploy(db_url, headers)
    assert reply["status"] == 200, f"deploy to {{db_url}} refused: {{reply}}"


def test_fine():
    assert True
'''


async def call(client: Client, tool: str, **arguments: object) -> str:
    with anyio.fail_after(120):
        result = await client.call_tool(tool, arguments)
    text: str = result.content[0].text
    assert not result.is_error, text
    return text


def no_secret(text: str, where: str) -> None:
    leaked = [kind for kind, secret in SECRETS.items() if secret in text]
    assert not leaked, f"{where} shows {leaked}:\n{text[:3000]}"


async def test_a_failing_tests_secrets_are_shown_nowhere_and_its_ordinary_names_everywhere(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_deploy.py").write_text(SUITE)
    (folder / ".mcpdebug").mkdir()
    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--log-level", "info"], cwd=str(folder))
    async with Client(params) as client:
        summary = await call(client, "run_tests", args=[*FAST, "-p", "no:randomly", "-q"])
        no_secret(summary, "run_tests")
        failure = await call(client, "get_failure", test="test_deploy")
        output = await call(client, "get_output", test="test_deploy")
    for reply, where in ((failure, "get_failure"), (output, "get_output")):
        no_secret(reply, where)
    for shown in (
        "author (str) = 'ada'",
        "passed (int) = 3",
        "tokens (list) = ['a', 'b']",
        "compass (str) = 'north'",
        "max_passengers (int) = 4",
        "oauth_scopes (list) = ['repo']",
        "postgres://admin:<redacted>@db.example.com:5432/app",  # only the password
        "'Authorization': 'Bearer <redacted>'",  # the scheme is kept
        "github (str) = 'ghp_<redacted>'",
        "'key_id': 'AKIA<redacted>'",
        "api_key (str) = <redacted>",
    ):
        assert shown in failure, (shown, failure)
    assert "deploy to postgres://admin:<redacted>@db.example.com" in failure  # the assertion's message
    assert "deploying with ghp_<redacted> to postgres://admin:<redacted>@db" in output  # what it printed

    cli = subprocess.run(
        [MCPDEBUG, "failure", "latest", "test_deploy"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    assert cli.returncode == 0, cli.stderr
    no_secret(cli.stdout, "mcpdebug failure")
    for shown in ("author (str) = 'ada'", "passed (int) = 3", "tokens (list) = ['a', 'b']"):
        assert shown in cli.stdout, cli.stdout

    report = folder / "report.html"
    written = subprocess.run(
        [MCPDEBUG, "report", "--html", str(report)], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert written.returncode == 0, written.stderr
    page = html.unescape(report.read_text())
    no_secret(page, "the HTML report")
    assert "'ada'" in page and "['a', 'b']" in page

    log = folder / ".mcpdebug" / "logs" / "debug-mcp-server.log"
    no_secret(log.read_text(), "the server log")
    entries = read_log(log)
    closed = [e for e in entries if e["message"] == "session:closed" and "counts" in e]
    assert closed and closed[-1]["counts"] == {"passed": 1, "failed": 1}, closed  # counts, not <redacted>


HANGING = f'''
import threading


def test_stuck():
    db_url = "postgres://admin:{DB_PASSWORD}@db.example.com:5432/app"
    github = "{GITHUB}"
    author = "ada"
    print(f"waiting for {{db_url}} with {{github}}", flush=True)
    threading.Event().wait(60)
'''


async def test_a_hang_reports_locals_source_and_output_without_secrets(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stuck=HANGING)
    result = run_inner(pytester, "--mcp-debug", "--mcp-debug-timeout=1", "--mcp-debug-hang-grace=1")
    result.assert_outcomes(failed=1)
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        reply = await call(client, "get_hang", test="test_stuck")
    no_secret(reply, "get_hang")
    for shown in (
        "author (str) = 'ada'",
        "db_url (str) = 'postgres://admin:<redacted>@db.example.com:5432/app'",  # a local
        '    db_url = "postgres://admin:<redacted>@db.example.com:5432/app"',  # the source
        "waiting for postgres://admin:<redacted>@db.example.com:5432/app with ghp_<redacted>",  # the output
    ):
        assert shown in reply, (shown, reply)
