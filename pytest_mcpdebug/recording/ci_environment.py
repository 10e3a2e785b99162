"""What a run ran in: its environment variables (secrets hidden), its CI job and machine, a CI shard's label.

A failure seen only in CI often comes from there: a variable the job sets differently (``TIERS=a, b``),
another Python, another branch. The controlling process reads the environment once, in the thread that
asks git for the code version (`code_version`), and sends both with it: the test thread never waits.
Values go through the one rule set for secrets (`redaction`): a value under a secret's name is hidden,
a credential inside any value (a URL's password, a provider's key) is replaced.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

# Limits
MAX_VARIABLES: Final = 400
"""Variables kept (by name); a CI job sets 100-200."""
MAX_VALUE_CHARS: Final = 1_000
"""A longer value keeps its head, and says how long it was (a PATH, a JSON blob)."""

SHARD_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}\Z"
"""A shard's label: it names the shard's processes and workers in the store."""

_PROVIDERS: Final = (
    # (provider, the variable that says so, {field: variable, ...}); the first found wins.
    (
        "github",
        "GITHUB_ACTIONS",
        {
            "workflow": "GITHUB_WORKFLOW",
            "job": "GITHUB_JOB",
            "run": "GITHUB_RUN_ID",
            "attempt": "GITHUB_RUN_ATTEMPT",
            "commit": "GITHUB_SHA",
            "branch": "GITHUB_HEAD_REF|GITHUB_REF_NAME",
            "event": "GITHUB_EVENT_NAME",
            "repository": "GITHUB_REPOSITORY",
            "runner": "RUNNER_NAME",
            "os": "RUNNER_OS",
        },
    ),
    (
        "gitlab",
        "GITLAB_CI",
        {
            "workflow": "CI_PIPELINE_NAME",
            "job": "CI_JOB_NAME",
            "run": "CI_PIPELINE_ID",
            "commit": "CI_COMMIT_SHA",
            "branch": "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME|CI_COMMIT_REF_NAME",
            "url": "CI_JOB_URL",
            "repository": "CI_PROJECT_PATH",
            "runner": "CI_RUNNER_DESCRIPTION",
            "node": "CI_NODE_INDEX",
            "nodes": "CI_NODE_TOTAL",
        },
    ),
    (
        "circleci",
        "CIRCLECI",
        {
            "workflow": "CIRCLE_WORKFLOW_ID",
            "job": "CIRCLE_JOB",
            "run": "CIRCLE_BUILD_NUM",
            "commit": "CIRCLE_SHA1",
            "branch": "CIRCLE_BRANCH",
            "url": "CIRCLE_BUILD_URL",
            "repository": "CIRCLE_PROJECT_REPONAME",
            "node": "CIRCLE_NODE_INDEX",
            "nodes": "CIRCLE_NODE_TOTAL",
        },
    ),
    (
        "buildkite",
        "BUILDKITE",
        {
            "workflow": "BUILDKITE_PIPELINE_SLUG",
            "job": "BUILDKITE_LABEL",
            "run": "BUILDKITE_BUILD_NUMBER",
            "commit": "BUILDKITE_COMMIT",
            "branch": "BUILDKITE_BRANCH",
            "url": "BUILDKITE_BUILD_URL",
            "node": "BUILDKITE_PARALLEL_JOB",
            "nodes": "BUILDKITE_PARALLEL_JOB_COUNT",
        },
    ),
    (
        "azure",
        "TF_BUILD",
        {
            "workflow": "BUILD_DEFINITIONNAME",
            "job": "SYSTEM_JOBDISPLAYNAME",
            "run": "BUILD_BUILDID",
            "commit": "BUILD_SOURCEVERSION",
            "branch": "SYSTEM_PULLREQUEST_SOURCEBRANCH|BUILD_SOURCEBRANCHNAME",
            "repository": "BUILD_REPOSITORY_NAME",
            "node": "SYSTEM_JOBPOSITIONINPHASE",
            "nodes": "SYSTEM_TOTALJOBSINPHASE",
        },
    ),
    (
        "jenkins",
        "JENKINS_URL",
        {
            "job": "JOB_NAME",
            "run": "BUILD_NUMBER",
            "commit": "GIT_COMMIT",
            "branch": "CHANGE_BRANCH|BRANCH_NAME|GIT_BRANCH",
            "url": "BUILD_URL",
            "runner": "NODE_NAME",
        },
    ),
)


def context(shard: str = "") -> dict[str, Any]:
    """What a run ran in, as its `CodeVersion` carries it: ``environment``, ``ci``, ``machine`` (what
    the machine gave it: CPUs, limits, encodings, user, `machine.facts`) and its ``shard``."""
    from pytest_mcpdebug.recording.machine import facts

    shown: dict[str, Any] = {"shard": shard} if shard else {}
    shown["machine"] = facts()  # each fact read on its own: never raises
    try:
        return {**shown, "environment": environment(), "ci": ci_metadata()}
    except Exception as exc:  # recording never changes a run
        return {**shown, "ci": {"note": f"environment unknown: {type(exc).__name__}: {exc}"}}


def ci_metadata(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The CI job a run is part of: provider, workflow, job, run, commit, branch, url, ...; {} outside CI."""
    env = os.environ if environ is None else environ
    for provider, flag, fields in _PROVIDERS:
        if not env.get(flag):
            continue
        found = {"provider": provider}
        for field, names in fields.items():
            value = next((env[n] for n in names.split("|") if env.get(n)), "")
            if value:
                found[field] = value[:MAX_VALUE_CHARS]
        if provider == "github" and {"repository", "run"} <= found.keys():
            server = env.get("GITHUB_SERVER_URL", "https://github.com")
            found["url"] = f"{server}/{found['repository']}/actions/runs/{found['run']}"
        return _shown(found)
    if env.get("CI", "").lower() in ("1", "true", "yes"):
        return {"provider": "ci"}
    return {}


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every variable by name, its value as shown: a secret's hidden, credentials inside replaced."""
    from pytest_mcpdebug.redaction import REDACTED, is_secret_name, redact

    env = os.environ if environ is None else environ
    shown: dict[str, str] = {}
    for name in sorted(env)[:MAX_VARIABLES]:
        value = env[name]
        if is_secret_name(name) and value:
            shown[name] = REDACTED
            continue
        if len(value) > MAX_VALUE_CHARS:
            value = f"{value[:MAX_VALUE_CHARS]}... ({len(value):,} characters)"
        shown[name] = redact(value)
    return shown


def _shown(found: dict[str, str]) -> dict[str, str]:
    from pytest_mcpdebug.redaction import redact

    return {k: redact(v) for k, v in found.items()}


def shard_from_ci(environ: Mapping[str, str] | None = None) -> str:
    """A parallel CI job's own label, when its CI numbers its nodes (GitLab ``parallel:``, CircleCI,
    Buildkite, Azure): ``2-of-4``; "" otherwise (a GitHub matrix says nothing: pass the label)."""
    found = ci_metadata(environ)
    node, nodes = found.get("node", ""), found.get("nodes", "")
    if not node.isdigit() or not nodes.isdigit() or int(nodes) < 2:
        return ""
    first = 0 if found["provider"] in ("circleci", "buildkite") else 1  # zero-based there
    return f"{int(node) - first + 1}-of-{nodes}"


def is_shard_label(text: str) -> bool:
    return re.fullmatch(SHARD_PATTERN, text) is not None


def slug(label: str) -> str:
    """A label as part of a process name (spool and dump file names, parsed at their last ``.``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", label)
