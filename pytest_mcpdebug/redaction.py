"""Secrets kept out of everything shown: the one rule set for values, messages and log lines.

Used wherever a value or a line leaves the test process: the values of a failure's snapshot, a live
hold and a hang report (`pytest_mcpdebug.values`), the messages and tracebacks the recorder sends,
the output lines the server shows (MCP replies, the CLI, the HTML report), the server's JSON log
and so the TUI that reads it. The server imports it from here: the plugin never imports the server.

Two kinds of rule:

- **Names.** A value is hidden when its name says it is a secret, as a whole identifier or one of
  its parts, however it is written (``db_password``, ``apiKey``, ``X-Api-Key``, ``AWS.SECRET``):
  never inside another word (``author``, ``passed``, ``compass``, ``oauth_scopes`` are shown).
  A name that says something *about* a secret is shown: ``token_count``, ``password_length``,
  ``secret_name``, ``has_password``. ``tokens`` is shown (lexer and LLM tokens are counted in the
  plural; a credential is named ``token``, ``auth_token``, ``access_token``), ``passwords`` and
  ``secrets`` are not. A hidden value that reveals nothing (None, a bool, an empty string or
  container) is shown as it is, and an ``Authorization`` value keeps its scheme (``Bearer <redacted>``).
- **Shapes.** Provider key formats and credentials inside any text, each replaced alone and the
  rest kept (``postgres://admin:<redacted>@db``, ``ghp_<redacted>``): a port of gitleaks' rules
  and two of detect-secrets' plugins, named by rule id in `_RULES` (a distinctive prefix such as
  ``ghp_`` or ``sk_live_`` is matched glued to a word too: a redactor would rather hide than miss).
  As in gitleaks, a rule's regex runs only when one of its keywords is in the text: ordinary text
  costs one search for the keywords.

Nothing here is an entropy test: a random-looking value under an ordinary name, with no known
prefix or shape, is shown (entropy rules flag hashes, ids and test data by the dozen).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from typing import Any, Final

REDACTED: Final = "<redacted>"

# Names -----------------------------------------------------------------------------------------------

_SECRET_PARTS: Final = frozenset(
    {
        "password", "passwords", "passwd", "passphrase", "secret", "secrets", "credential",
        "credentials", "creds", "token", "apikey", "apikeys", "privatekey", "sessionid",
    }
)  # fmt: skip
"""A part that makes a name secret wherever it stands: ``db_password``, ``client_secret``."""
_SECRET_HEADS: Final = frozenset({"auth", "pass", "pwd", "cookie", "cookies", "authorization"})
"""A part that makes a name secret as its last part only: ``basic_auth``, ``db_pass``, but not
``auth_url`` or ``pass_count`` (as a qualifier it names something about the credential)."""
_SECRET_PAIRS: Final = frozenset(
    {
        ("api", "key"), ("api", "keys"), ("private", "key"), ("signing", "key"), ("encryption", "key"),
        ("access", "key"), ("session", "key"), ("master", "key"), ("auth", "header"),
        ("auth", "headers"), ("authorization", "header"), ("auth", "key"),
    }
)  # fmt: skip
"""Neighbouring parts that together make a name secret: ``api_key``, ``apiKey``, ``private_key``."""
_ABOUT_A_SECRET: Final = frozenset(
    {
        "count", "counts", "num", "number", "len", "length", "size", "type", "types", "kind", "name",
        "names", "file", "filename", "path", "dir", "url", "uri", "endpoint", "env", "var", "field",
        "fields", "prefix", "suffix", "pattern", "regex", "format", "policy", "rule", "rules",
        "required", "enabled", "disabled", "expiry", "expires", "expiration", "ttl", "timeout",
        "min", "max", "id", "ids", "hint", "label", "error", "errors", "valid", "index", "idx",
        "limit", "mode", "source", "style", "class", "cls", "method", "scheme", "scopes", "scope",
    }
)  # fmt: skip
"""A last part that says the name holds something about a secret, not the secret: ``token_count``."""
_ABOUT_A_SECRET_FIRST: Final = frozenset(
    {"is", "has", "have", "use", "uses", "should", "needs", "no", "num", "n"}
)
"""A first part that makes the name a question or a count: ``has_password``, ``n_tokens``."""
_PART: Final = r"[A-Z]{2,}(?=[A-Z][a-z]|[^A-Za-z]|$)|[A-Z]?[a-z]+|[A-Z]+|[0-9]+"


@functools.lru_cache(maxsize=8192)
def is_secret_name(name: str) -> bool:
    """Whether a value under ``name`` (a variable, attribute, key or header) is a secret."""
    parts = [p.lower() for p in _part_re().findall(name) if not p.isdigit()]
    if not parts:
        return False
    if parts[-1] in _ABOUT_A_SECRET or (len(parts) > 1 and parts[0] in _ABOUT_A_SECRET_FIRST):
        return False
    if parts[-1] in _SECRET_HEADS and (parts[-1] != "pass" or len(parts) > 1):
        return True
    if any(p in _SECRET_PARTS for p in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_EXPRESSION: Final = r"""[A-Za-z_]\w*(?:\s*(?:\.\s*[A-Za-z_]\w*|\[\s*(?:'[^']*'|"[^"]*")\s*\]))*"""


def is_secret_expression(expression: str) -> bool:
    """Whether an evaluated expression names a secret: ``api_token``, ``settings.password``,
    ``config["db_password"]`` (its last name decides); a computation (``len(token)``) does not."""
    text = expression.strip()
    if not _expression_re().fullmatch(text):
        return False
    last = re.split(r"[.\[]", text)[-1].strip(" \t'\"]")
    return is_secret_name(last)


def reveals_nothing(value: Any) -> bool:
    """None, a bool, an empty string or container: shown even under a secret's name (that a
    password is unset or empty is often the bug, and it gives nothing away)."""
    if value is None or isinstance(value, bool):
        return True
    try:
        return isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)) and len(value) == 0
    except Exception:
        return False


_SCHEMES: Final = ("bearer", "basic", "token", "bot", "digest", "negotiate", "ntlm", "apikey")


def hidden(text: str) -> str:
    """What is shown for the rendered ``text`` of a value under a secret's name: `REDACTED`, or its
    quotes and authorization scheme around it (``'Bearer <redacted>'``)."""
    quote = text[0] if text[:1] in ("'", '"') and text[-1:] == text[:1] and len(text) > 1 else ""
    inner = text[1:-1] if quote else text
    scheme, space, rest = inner.partition(" ")
    if space and rest and scheme.lower() in _SCHEMES:
        return f"{quote}{scheme} {REDACTED}{quote}"
    return REDACTED


# Shapes ----------------------------------------------------------------------------------------------


class Rule:
    """A value shape: its regex runs on a text holding one of ``keywords`` (lower case); the group
    ``s`` of each match is replaced, the rest kept. ``source`` names the rule it was ported from.
    (A plain class: a NamedTuple costs a millisecond to define, and this module is imported by every
    run with a timeout.)"""

    __slots__ = ("check", "flags", "id", "keywords", "pattern", "source")

    def __init__(
        self,
        id: str,
        source: str,
        keywords: tuple[str, ...],
        pattern: str,
        flags: int = 0,
        check: Callable[[str], bool] | None = None,
    ) -> None:
        self.id, self.source, self.keywords = id, source, keywords
        self.pattern, self.flags, self.check = pattern, flags, check


def _random_looking(secret: str) -> bool:
    """A credential after ``Bearer``/``Basic``, not a word of prose (``Basic usage``): it holds a
    digit or one of ``._~+/=-``, or mixes case past its first letter."""
    return any(c.isdigit() or c in "._~+/=-" for c in secret) or (
        any(c.isupper() for c in secret[1:]) and any(c.islower() for c in secret)
    )


_GITLEAKS: Final = "gitleaks config/gitleaks.toml (MIT)"
_DETECT_SECRETS: Final = "detect-secrets plugins (Apache-2.0)"
_RULES: Final = (
    Rule(
        "url-userinfo-password",
        _DETECT_SECRETS + ": basic_auth.BasicAuthDetector",
        ("://",),
        r"""\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'"<>]*:(?P<s>[^\s/?#@'"<>]+)@""",
    ),
    Rule(
        "aws-access-token",
        _GITLEAKS + "; widened to detect-secrets' [A-Z0-9]",
        ("akia", "asia", "abia", "acca", "a3t"),
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?P<s>[A-Z0-9]{16})\b",
    ),
    Rule(
        "aws-secret-access-key (in context)",
        _DETECT_SECRETS + ": aws.AWSKeyDetector",
        ("aws",),
        r"""aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['"](?P<s>[0-9a-zA-Z/+]{40})['"]""",
        re.IGNORECASE,
    ),
    Rule(
        "github-pat, github-oauth, github-app-token, github-refresh-token",
        _GITLEAKS + "; from 20 characters on",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"gh[pousr]_(?P<s>[0-9A-Za-z]{20,})",
    ),
    Rule("github-fine-grained-pat", _GITLEAKS, ("github_pat_",), r"github_pat_(?P<s>\w{22,})"),
    Rule(
        "gitlab-pat, -deploy-token, -feed-token, -scim-token, -runner-authentication-token, "
        "-cicd-job-token, -ptt, -oauth-app-secret, -kubernetes-agent-token, -incoming-mail-token, "
        "-feature-flag-client-token",
        _GITLEAKS,
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "glcbt-",
            "glptt-",
            "gloas-",
            "glagent-",
            "glimt-",
            "glffct-",
        ),
        r"gl(?:pat|dt|ft|soat|rt|cbt|ptt|oas|agent|imt|ffct)-(?P<s>[\w-]{20,})",
    ),
    Rule("gitlab-rrt", _GITLEAKS, ("gr1348941",), r"\bGR1348941(?P<s>[\w-]{20,})"),
    Rule(
        "slack-bot-token, slack-user-token, slack-legacy-*-token, slack-config-*-token",
        _GITLEAKS,
        ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xoxe."),
        r"xox[abposre][.-](?P<s>[0-9A-Za-z.-]{8,})",
    ),
    Rule("slack-app-token", _GITLEAKS, ("xapp-",), r"(?i)\bxapp-\d-(?P<s>[A-Z0-9]+-\d+-[a-z0-9]+)"),
    Rule(
        "slack-webhook-url",
        _GITLEAKS,
        ("hooks.slack.com",),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/]{20,})",
    ),
    Rule(
        "stripe-access-token",
        _GITLEAKS,
        ("sk_test", "sk_live", "sk_prod", "rk_test", "rk_live", "rk_prod"),
        r"[rs]k_(?:test|live|prod)_(?P<s>[a-zA-Z0-9]{10,99})(?![a-zA-Z0-9])",
    ),
    Rule("gcp-api-key", _GITLEAKS + "; from 30 characters on", ("aiza",), r"AIza(?P<s>[\w-]{30,})"),
    Rule(
        "private-key (PEM; also a GCP service account's private_key)",
        _GITLEAKS + "; the body up to END, or to the end of a cut text",
        ("private key",),
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?P<s>.+?)"
        r"(?=-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
    Rule(
        "jwt",
        _GITLEAKS + "; from 10 characters a part",
        ("eyj", "eya"),
        r"\b(?P<s>ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_/\\-]{10,}\.(?:[A-Za-z0-9_/\\-]+={0,2})?)",
    ),
    Rule(
        "authorization (Bearer, Basic, Token, ... credentials)",
        _GITLEAKS + ": curl-auth-header, its scheme alternatives",
        ("bearer", "basic", "token", "bot ", "digest", "negotiate", "ntlm"),
        r"(?i)\b(?:bearer|basic|token|bot|digest|negotiate|ntlm)[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{8,})",
        check=_random_looking,
    ),
)

_NAMED_WORDS: Final = (
    "pass", "pwd", "secret", "token", "cred", "key", "auth", "cookie", "session",
)  # fmt: skip
"""A word of every secret name part (lower case): text without one holds no ``name=value`` secret."""
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_AFTER_NAME: Final = (
    r"""(?P<q>['"]?)(?P<sep>[ \t]*[:=](?![=/])[ \t]*)"""
    r"""(?!(?i:bearer|basic|token|bot|digest|negotiate|ntlm|apikey)[ \t]+<)"""
    r"""(?P<v>(?:(?i:bearer|basic|token|bot|digest|negotiate|ntlm|apikey)[ \t]+)?"""
    r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|[^\s,;)}\]&'"<>]+))"""
)
"""What follows a secret's name in ``name=value``, ``name: value``, ``'name': 'value'``,
``Authorization: Bearer value``: the quote closing the name, the separator and the value."""
_AFTER_NAME_IN_CODE: Final = (
    r"""(?P<q>['"]?)(?P<sep>[ \t]*(?::[ \t]*[\w.\[\]|, ]+?[ \t]*)?[:=](?!=)[ \t]*)"""
    r"""(?P<v>[bBrRuUfF]{0,2}(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))"""
)
"""The same in source code, where only a string literal is a value (``password: str = "..."``)."""


_Replace = Callable[["re.Match[str]"], str]


@functools.lru_cache(maxsize=1)
def _gate() -> tuple[re.Pattern[str], dict[str, list[int]]]:
    """One regex finding every keyword (compiled on first use: importing this module compiles
    nothing), and which rules each keyword calls for; the ``name=value`` rule is the last."""
    called: dict[str, list[int]] = {}
    for number, rule in enumerate(_RULES):
        for keyword in rule.keywords:
            called.setdefault(keyword, []).append(number)
    for word in _NAMED_WORDS:
        called.setdefault(word, []).append(len(_RULES))
    return re.compile(_trie(sorted(called))), called


def _trie(words: list[str]) -> str:
    """An alternation of ``words`` grouped by their first characters (``a(?:kia|sia|ws)|...``): the
    regex engine tries one group at a text's position, not every word (3x faster on long texts).
    None of the keywords is another's prefix, so each match is a whole keyword."""
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word[1:])
    parts = []
    for first, rests in groups.items():
        if len(rests) == 1 or not all(rests):
            parts += [re.escape(first + rest) for rest in sorted(rests, key=len, reverse=True)]
        else:
            parts.append(re.escape(first) + "(?:" + _trie(rests) + ")")
    return "|".join(parts)


@functools.lru_cache(maxsize=len(_RULES))
def _rule(number: int) -> tuple[re.Pattern[str], _Replace]:
    """Rule ``number``'s regex and replacement, compiled when a text first calls for it."""
    rule = _RULES[number]
    return re.compile(rule.pattern, rule.flags), _replace_secret(rule.check)


@functools.lru_cache(maxsize=1)
def _part_re() -> re.Pattern[str]:
    return re.compile(_PART)


@functools.lru_cache(maxsize=1)
def _expression_re() -> re.Pattern[str]:
    return re.compile(_EXPRESSION)


@functools.lru_cache(maxsize=2)
def _named_word_re(lowered: bool) -> re.Pattern[str]:
    """Where a secret's name may be (a word of `_NAMED_WORDS`): in the lower-cased text (6x faster
    than a case-insensitive search), or in the text itself when lowering changed its length."""
    words = _trie(sorted(_NAMED_WORDS))
    return re.compile(words) if lowered else re.compile(words, re.IGNORECASE)


@functools.lru_cache(maxsize=2)
def _after_name_re(code: bool) -> re.Pattern[str]:
    return re.compile(_AFTER_NAME_IN_CODE if code else _AFTER_NAME)


def _replace_secret(check: Callable[[str], bool] | None) -> _Replace:
    def replace(match: re.Match[str]) -> str:
        secret = match["s"]
        if secret == REDACTED or (check is not None and not check(secret)):
            return match[0]
        start, end = match.span("s")
        base = match.start()
        return match[0][: start - base] + REDACTED + match[0][end - base :]

    return replace


def _shown_value(value: str) -> str | None:
    """What a secret's value ``value`` (as written after its name) is shown as; None to keep it."""
    if value[:1] not in ("'", '"') and value[-1:] in ("'", '"'):  # b"...": a literal's prefix
        value = value.lstrip("bBrRuUfF")
    if not any(c.isalnum() for c in value):
        return None  # punctuation is no credential: "unexpected token: ')'"
    shown = hidden(value)
    return None if shown == value else shown


def _named_sub(text: str, lowered: str, code: bool) -> str:
    """Every ``name=value`` of ``text`` whose name is a secret's, its value hidden (`hidden`). The
    names are found from the words they must hold (`_NAMED_WORDS`), so a text costs one search and
    a few steps a match, not a regex match at every word."""
    after = _after_name_re(code)
    out: list[str] = []
    done = checked = 0
    same = len(lowered) == len(text)  # lower() keeps ASCII's length, not every letter's ("İ")
    for word in _named_word_re(same).finditer(lowered if same else text):
        if word.start() < checked:
            continue  # a word of a name read already (auth_token)
        start, end = word.start(), word.end()
        while start > done and text[start - 1] in _NAME_CHARS:
            start -= 1
        while start < word.start() and not (text[start].isalpha() or text[start] == "_"):
            start += 1  # "--password": the name starts at its first letter
        while end < len(text) and text[end] in _NAME_CHARS:
            end += 1
        checked = end
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            continue
        name = text[start:end]
        if not is_secret_name(name):
            continue
        pair = after.match(text, end)
        shown = None if pair is None else _shown_value(pair["v"])
        if pair is None or shown is None:
            continue
        out += (text[done:start], name, pair["q"], pair["sep"], shown)
        done = checked = pair.end()
    return "".join(out) + text[done:] if out else text


def redact(text: str, *, code: bool = False) -> str:
    """``text`` with every secret in it replaced by `REDACTED`: credentials by their shape (`_RULES`),
    and the value of every ``name=value`` whose name is a secret's (`is_secret_name`). With ``code``
    (a line of source), only a string literal counts as such a value. Idempotent."""
    if not text:
        return text
    gate, called = _gate()
    lowered = text.lower()
    found = gate.findall(lowered)
    if not found:
        return text
    for number in sorted({n for keyword in set(found) for n in called[keyword]}):
        if number < len(_RULES):
            pattern, replace = _rule(number)
            replaced = pattern.sub(replace, text)
            if replaced != text:
                text, lowered = replaced, replaced.lower()
        elif "=" in text or ":" in text:
            text = _named_sub(text, lowered, code)
    return text


def redact_args(args: list[str]) -> list[str]:
    """A command line as it is shown: ``--db-url=postgres://u:<redacted>@db``, and the value of a
    secret's option given apart, ``--token <redacted>``."""
    shown = [redact(arg) for arg in args]
    for i, arg in enumerate(args[:-1]):
        if arg.startswith("-") and "=" not in arg and is_secret_name(arg.lstrip("-")):
            shown[i + 1] = REDACTED
    return shown


def rules() -> list[tuple[str, str]]:
    """(rule id, where it comes from) of every value shape: for the README and the tests."""
    return [(r.id, r.source) for r in _RULES]
