"""The rule set every value and line shown goes through: secret names as identifiers and their parts,
credentials by their shape, only the secret part replaced, and ordinary names and text left alone."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_mcpdebug.recording.reporter import _shown_args
from pytest_mcpdebug.redaction import (
    _SECRET_PAIRS,
    REDACTED,
    is_secret_expression,
    is_secret_name,
    redact,
    redact_args,
    reveals_nothing,
    rules,
)
from pytest_mcpdebug.values import VarBuilder, render, render_named

# Fake credentials of each kind, in the providers' formats (none of them is or was ever valid).
GITHUB = "ghp_" + "R2d2C3po" * 4 + "ab12"
GITHUB_FINE = "github_pat_11ABCDEFG0" + "x" * 72
GITLAB = "glpat-" + "Zx9" * 7
SLACK = "xoxb-123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_HOOK = "https://hooks.slack.com/services/T00000000/B00000000/" + "Xy7" * 8
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
AWS_ID = "AKIAQ3EGRIBKYEXAMPL3"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKY"
GCP = "AIzaSyB" + "k9" * 16
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM_BODY = "MIIEowIBAAKCAQEA7bq" + "Zm9vYmFy" * 10
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"

KINDS = [
    # (kind, text, secret, what is shown instead)
    ("url password", "postgres://admin:S3cretPassw0rd@db.example.com:5432/app", "S3cretPassw0rd",
     f"postgres://admin:{REDACTED}@db.example.com:5432/app"),
    ("url password, no user", "redis://:pw-9f8e7d@cache:6379/0", "pw-9f8e7d", f"redis://:{REDACTED}@cache:6379/0"),
    ("github token", f"token {GITHUB} in use", GITHUB, f"token ghp_{REDACTED} in use"),
    ("github fine-grained token", GITHUB_FINE, GITHUB_FINE, f"github_pat_{REDACTED}"),
    ("gitlab token", f"GITLAB={GITLAB}", GITLAB, f"GITLAB=glpat-{REDACTED}"),
    ("slack token", SLACK, SLACK, f"xoxb-{REDACTED}"),
    ("slack webhook", SLACK_HOOK, SLACK_HOOK, f"https://hooks.slack.com/services/{REDACTED}"),
    ("stripe key", f"stripe.api_key_value({STRIPE!r})", STRIPE, f"stripe.api_key_value('sk_live_{REDACTED}')"),
    ("aws access key id", f"id={AWS_ID}", AWS_ID, f"id=AKIA{REDACTED}"),
    ("aws secret key in context", f'aws_creds = {{"aws_key": "{AWS_SECRET}"}}', AWS_SECRET, REDACTED),
    ("gcp api key", f"https://maps.example.com/?key={GCP}&q=x", GCP, f"AIza{REDACTED}"),
    ("jwt", f"session {JWT} ok", JWT, f"session {REDACTED} ok"),
    ("private key block", f"key = '''{PEM}'''", PEM_BODY,
     f"-----BEGIN RSA PRIVATE KEY-----{REDACTED}-----END RSA PRIVATE KEY-----"),
    ("private key cut short", PEM[:80], PEM_BODY[:40], f"-----BEGIN RSA PRIVATE KEY-----{REDACTED}"),
    ("gcp service account", '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
     + PEM_BODY + '\\n-----END PRIVATE KEY-----\\n", "client_email": "ci@proj.iam.gserviceaccount.com"}',
     PEM_BODY, '"client_email": "ci@proj.iam.gserviceaccount.com"'),
    ("bearer header", "Authorization: Bearer abc.def.ghi", "abc.def.ghi", f"Authorization: Bearer {REDACTED}"),
    ("bearer header, short token", "Authorization: Bearer s3cr", "s3cr", f"Authorization: Bearer {REDACTED}"),
    ("basic header", "Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", f"Authorization: Basic {REDACTED}"),
    ("headers dict", "{'Authorization': 'Bearer abc.def.ghi', 'Accept': 'application/json'}", "abc.def.ghi",
     f"{{'Authorization': 'Bearer {REDACTED}', 'Accept': 'application/json'}}"),
    ("named value", "Settings(user='ada', password='hunter2', port=5432)", "hunter2",
     f"Settings(user='ada', password={REDACTED}, port=5432)"),
    ("command-line option", "--db-password=hunter2 -v", "hunter2", f"--db-password={REDACTED} -v"),
    ("query string", "https://api.example.com/v1?user=ada&access_token=t0k3n42&page=2", "t0k3n42",
     f"user=ada&access_token={REDACTED}&page=2"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "text", "secret", "shown"), KINDS, ids=[k[0] for k in KINDS])
def test_each_credential_kind_is_replaced_alone(kind: str, text: str, secret: str, shown: str) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert shown in redacted
    assert redact(redacted) == redacted  # shown once, shown the same again (the server log redacts replies)


def test_every_rule_names_its_source() -> None:
    for rule_id, source in rules():
        assert rule_id and ("gitleaks" in source or "detect-secrets" in source)


def test_the_keyword_search_finds_each_keyword_whole() -> None:
    """The rules run only on a text holding one of their keywords, found by one search (`_gate`)."""
    from pytest_mcpdebug.redaction import _gate

    gate, called = _gate()
    for word in called:
        assert gate.findall(f"x {word} y") == [word]


@pytest.mark.parametrize(
    "name",
    ["password", "passwd", "db_password", "DB_PASSWORD", "apiKey", "api_key", "APIKey", "x-api-key", "secret",
     "client_secret", "auth_token", "access_token", "accessToken", "private_key", "credentials", "token",
     "Authorization", "basic_auth", "db_pass", "settings.password", "'password'", "password2", "SECRET_KEY",
     "aws_secret_access_key", "session_cookie", "auth_header"],
)  # fmt: skip
def test_secret_names_as_identifiers_and_their_parts(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["author", "passed", "failed", "tokens", "compass", "max_passengers", "oauth_scopes", "secretary",
     "bypass", "keyboard", "monkey", "session_id", "token_count", "password_length", "secret_name", "has_password",
     "n_tokens", "auth_url", "token_type", "aws_access_key_id", "key", "keys", "passenger", "authority",
     "authentication_method", "pass_count"],
)  # fmt: skip
def test_ordinary_names_and_names_about_a_secret_are_shown(name: str) -> None:
    assert not is_secret_name(name)


def test_counts_and_outcome_names_are_never_redacted() -> None:
    text = "3 passed, 1 failed, 2 skipped in 0.52s; passed=3 failed=1 tokens=['a', 'b'] author='ada'"
    assert redact(text) == text


def test_values_under_secret_names() -> None:
    assert render_named("password", "hunter2") == REDACTED
    assert render_named("auth_header", "Bearer abc.def.ghi") == f"'Bearer {REDACTED}'"
    for nothing in (None, True, "", [], {}):  # an unset or empty password is often the bug
        assert render_named("password", nothing) == render(nothing)
        assert reveals_nothing(nothing)
    assert render_named("tokens", ["a", "b"]) == "['a', 'b']"
    assert render({"user": "ada", "api_key": "k-123", "Authorization": "Basic dXNlcjpwYXNz"}) == (
        f"{{'user': 'ada', 'api_key': {REDACTED}, 'Authorization': 'Basic {REDACTED}'}}"
    )
    builder = VarBuilder()
    var = builder.var("config", {"db_url": "postgres://u:S3cret99@db/app", "retries": 3}, 0)
    assert "S3cret99" not in var.value and f"postgres://u:{REDACTED}@db/app" in var.value
    assert [(c.name, c.value) for c in builder.children[var.ref]] == [
        ("'db_url'", f"'postgres://u:{REDACTED}@db/app'"),
        ("'retries'", "3"),
    ]


def test_a_long_value_is_redacted_before_it_is_cut() -> None:
    text = "x" * 190 + GITHUB  # the token straddles the 200-character cut
    shown = render(text)
    assert GITHUB[:10] not in shown and "ghp_" + GITHUB[4:8] not in shown
    assert shown.endswith("... (truncated)")


def test_a_runs_command_line() -> None:
    args = ["-q", "--db-url=postgres://u:pw-9f8e7d@db/x", "--api-token", "t0k3n42", "-k", "auth or passed"]
    assert redact_args(args) == ["-q", f"--db-url=postgres://u:{REDACTED}@db/x", "--api-token", REDACTED, "-k",
                                 "auth or passed"]  # fmt: skip
    assert _shown_args(args) == redact_args(args)
    plain = ["-q", "tests/", "-x"]
    assert _shown_args(plain) is plain  # nothing that may hold a secret: the rule set is not even loaded


def test_expressions_naming_a_secret() -> None:
    for expression in ("api_token", " settings.password ", 'config["db_password"]', "self.client_secret"):
        assert is_secret_expression(expression), expression
    for expression in ("len(token)", "total", "tokens", "settings.author", "password == 'x'"):
        assert not is_secret_expression(expression), expression


def test_source_lines_keep_their_code() -> None:
    assert redact('    password: str = "hunter2"', code=True) == f"    password: str = {REDACTED}"
    assert redact("def connect(password: str, token: str | None = None) -> None:", code=True) == (
        "def connect(password: str, token: str | None = None) -> None:"
    )
    assert redact("    assert token == expected", code=True) == "    assert token == expected"
    assert redact('    url = "postgres://admin:S3cretPassw0rd@db/app"', code=True) == (
        f'    url = "postgres://admin:{REDACTED}@db/app"'
    )


def test_prose_is_not_taken_for_credentials() -> None:
    for text in (
        "Basic usage: see the basic functionality first",
        "the Bearer token is sent in a header",
        "unexpected token: ')'",
        "https://example.com:8080/path?email=ada@example.com",
        "assert token == 'abc'",
    ):
        assert redact(text) == text


# Properties -------------------------------------------------------------------------------------------

PAIRED = {word for pair in _SECRET_PAIRS for word in pair}  # api (key), private (key), auth (header)
words = st.from_regex(r"[a-z]{2,9}", fullmatch=True).filter(
    lambda w: not is_secret_name(w) and w not in PAIRED
)
"""Words that are no secret's name alone (``author``, ``compass``, ``tokens``) nor half of one."""


def _joined(parts: list[str], style: str) -> str:
    if style == "snake":
        return "_".join(parts)
    if style == "upper":
        return "_".join(parts).upper()
    if style == "kebab":
        return "-".join(parts)
    if style == "dotted":
        return ".".join(parts)
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(words, min_size=1, max_size=4), st.sampled_from(["snake", "camel", "upper", "kebab", "dotted"])
)
@example(["author"], "snake")
@example(["max", "passengers"], "snake")
@example(["oauth", "scopes"], "camel")
@example(["compass"], "upper")
@example(["tokens"], "snake")
def test_ordinary_identifiers_are_shown(parts: list[str], style: str) -> None:
    """Property: a name none of whose parts is a secret's (``author``, ``maxPassengers``,
    ``OAUTH_SCOPES``, ``tokens``) is shown, with its value, in every spelling."""
    name = _joined(parts, style)
    assert not is_secret_name(name), name
    if name.isidentifier() and not keyword.iskeyword(name):
        assert render_named(name, "ada") == "'ada'"
        assert redact(f"{name}='ada', {name}: 3") == f"{name}='ada', {name}: 3"


SECRETS = st.sampled_from([k for k in KINDS if k[2] in k[1] and not k[0].startswith("named")])


@settings(max_examples=300, deadline=None)
@given(
    SECRETS,
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
)
def test_a_secret_embedded_in_any_text_is_replaced(
    kind: tuple[str, str, str, str], before: str, after: str
) -> None:
    """Property: a credential with text of any kind around it (separated by a space, as words are) is
    never shown, and the text around it is."""
    _, text, secret, _ = kind
    redacted = redact(f"{before} {text} {after}")
    assert secret not in redacted
    assert REDACTED in redacted


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_redaction_is_idempotent_and_never_raises(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    assert once == text or REDACTED in once  # it only ever puts the marker in a secret's place


def test_a_debug_sessions_values_from_debugpy_go_through_the_same_rules() -> None:
    """debugpy renders a debugged script's values itself; the server redacts its text the same way."""
    from mcpdebug.debug.inspect import _variable

    def shown(name: str, value: str, ref: int = 0) -> tuple[str, int]:
        var = _variable({"name": name, "value": value, "type": "x", "variablesReference": ref})
        return var["value"], var["variablesReference"]

    assert shown("password", "'hunter2'") == (REDACTED, 0)
    assert shown("credentials", "<Creds object at 0x7f>", 7) == (REDACTED, 0)  # not expandable either
    assert shown("password", "None") == ("None", 0)
    assert shown("headers", "{'Authorization': 'Bearer abc.def.ghi'}", 3) == (
        f"{{'Authorization': 'Bearer {REDACTED}'}}",
        3,
    )
    assert shown("db_url", "'postgres://admin:S3cretPassw0rd@db/app'") == (
        f"'postgres://admin:{REDACTED}@db/app'",
        0,
    )
    assert shown("author", "'ada'") == ("'ada'", 0)
    assert shown("passed", "3") == ("3", 0)
