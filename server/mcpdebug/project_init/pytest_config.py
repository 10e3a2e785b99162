"""The pytest configuration that records every run: found where pytest finds it, merged into.

pytest reads the first of these it finds, from the folder it starts in upwards: `pytest.toml` /
`.pytest.toml` (``[pytest]``, pytest 9), `pytest.ini` / `.pytest.ini` (``[pytest]``, even empty),
`pyproject.toml` with ``[tool.pytest.ini_options]`` (or pytest 9's native ``[tool.pytest]``),
`tox.ini` with ``[pytest]``, `setup.cfg` with ``[tool:pytest]``. The settings go into that file;
with none, into the project's `pyproject.toml` (``[tool.pytest.ini_options]``, read by pytest 8
and 9) when it has one, else a new `pytest.ini`.

TOML is edited with tomlkit, which keeps every comment, blank line and layout of the file it
rewrites (the standard library only reads TOML); INI files line by line (`ini_file`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpdebug.project_init import ini_file
from mcpdebug.project_init.changes import read_if_any, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

COMMENT = "pytest-mcpdebug (`mcpdebug init`): record every run for agents; hang timeout in seconds"
INI_SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}
TOML_NAMES = ("pytest.toml", ".pytest.toml")
OUR_KEYS = ("mcpdebug", "mcpdebug_timeout", "mcpdebug_coverage")


class ConfigError(Exception):
    """A configuration file that cannot be read; the message names it and what is wrong."""


@dataclass
class PytestConfig:
    path: Path
    style: str
    """``ini`` (an INI section), ``ini_options`` ([tool.pytest.ini_options]), ``native``
    ([tool.pytest] or pytest.toml's [pytest]: TOML types, strings where pytest expects them)."""
    values: dict[str, Any]
    exists: bool

    @property
    def where(self) -> str:
        """The section, as a person names it."""
        if self.style == "ini":
            return f"[{INI_SECTIONS[self.path.name]}]"
        if self.style == "ini_options":
            return "[tool.pytest.ini_options]"
        return "[pytest]" if self.path.name in TOML_NAMES else "[tool.pytest]"

    def pythonpath(self) -> list[str]:
        raw = self.values.get("pythonpath")
        if isinstance(raw, list):
            return [str(p) for p in raw]
        return str(raw).split() if raw else []


def locate(project: Path) -> PytestConfig:
    """The configuration pytest started in ``project`` reads (or where a new one goes)."""
    for folder in (project, *project.parents):
        for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):
            path = folder / name
            if path.is_file():
                return _read(path)
        for name in ("pyproject.toml", "tox.ini", "setup.cfg"):
            path = folder / name
            if path.is_file():
                found = _read(path)
                if found.exists:
                    return found
    pyproject = project / "pyproject.toml"
    if pyproject.is_file():
        return PytestConfig(pyproject, "ini_options", {}, False)
    return PytestConfig(project / "pytest.ini", "ini", {}, False)


def _read(path: Path) -> PytestConfig:
    """The pytest settings of ``path``; ``exists`` False when it holds none (a tox.ini without
    ``[pytest]``, a pyproject.toml without ``[tool.pytest...]``)."""
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return parse(path, text)


def parse(path: Path, text: str) -> PytestConfig:
    """The pytest settings ``text`` holds, read as pytest reads a file of that name."""
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid TOML ({exc}); fix it, then run mcpdebug init again"
            ) from None
        if path.name in TOML_NAMES:
            return PytestConfig(path, "native", dict(data.get("pytest", {})), True)
        tool = data.get("tool", {}).get("pytest", {})
        if "ini_options" in tool:
            return PytestConfig(path, "ini_options", dict(tool["ini_options"]), True)
        if tool:
            return PytestConfig(path, "native", dict(tool), True)
        return PytestConfig(path, "ini_options", {}, False)
    values = ini_file.read(text, INI_SECTIONS[path.name])
    always = path.name in ("pytest.ini", ".pytest.ini")  # pytest takes it even without [pytest]
    return PytestConfig(path, "ini", values or {}, values is not None or always)


def wanted(
    config: PytestConfig, timeout: float | None, default_timeout: float, coverage: bool
) -> dict[str, Any]:
    """The settings to write, as Python values: recording on, the hang timeout (the one configured
    is kept unless ``timeout`` is given), coverage when asked for."""
    settings: dict[str, Any] = {"mcpdebug": True}
    if timeout is not None or not str(config.values.get("mcpdebug_timeout", "")).strip():
        settings["mcpdebug_timeout"] = default_timeout if timeout is None else timeout
    if coverage:
        settings["mcpdebug_coverage"] = True
    return {k: v for k, v in settings.items() if not same_value(config.values.get(k), v)}


def same_value(current: Any, value: Any) -> bool:
    if current is None:
        return False
    if isinstance(value, bool):
        return str(current).strip().lower() in (
            ("true", "1", "yes", "on") if value else ("false", "0", "no", "off")
        )
    try:
        return float(str(current).strip()) == float(value)
    except ValueError:
        return False


def render(config: PytestConfig, settings: dict[str, Any]) -> str:
    """The file's text with ``settings`` set (the text it has when they are empty), read back as
    pytest would read it: a layout the edit cannot handle is an error that says what to add."""
    before = read_if_any(config.path) or ""
    if not settings:
        return before
    comment = None if any(k in config.values for k in OUR_KEYS) else COMMENT  # said once, when first set
    if config.style == "ini":
        section = INI_SECTIONS[config.path.name]
        text = ini_file.set_keys(before, section, {k: _ini(v) for k, v in settings.items()}, comment)
    else:
        text = _toml(before, config, settings, comment)
    try:
        after = parse(config.path, text)
    except ConfigError:
        after = None
    if after is None or any(not same_value(after.values.get(k), v) for k, v in settings.items()):
        lines = ", ".join(f"{k} = {_ini(v)}" for k, v in settings.items())
        raise ConfigError(
            f"{config.path} could not be merged into as it is laid out, so it was left as it is: add "
            f"{lines} to its {config.where} yourself"
        )
    return text


def _ini(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _toml(before: str, config: PytestConfig, settings: dict[str, Any], comment: str | None) -> str:
    import tomlkit  # only `mcpdebug init` of a TOML configuration needs it

    doc = tomlkit.parse(before)
    table, new = _table(doc, config)
    inline = isinstance(table, tomlkit.items.InlineTable)  # `ini_options = {...}`: no comment fits
    body = table.value.body
    # blank lines and comments after the last key lead into the next table: they stay last
    trailing: list[Any] = []
    while body and body[-1][0] is None and not inline:
        trailing.insert(0, body.pop())
    if comment and not inline:
        table.add(tomlkit.comment(comment))
    for key, value in settings.items():
        if key == "mcpdebug_timeout":
            value = _ini(value) if config.style == "native" else _number(value)
        table[key] = value
    body.extend(trailing)
    if new:
        table.add(tomlkit.nl())
    text = tomlkit.dumps(doc)
    if text.endswith("\n\n") and not before.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"
    if "\r\n" in before:  # the lines added end as the file's do
        text = re.sub(r"(?<!\r)\n", "\r\n", text)
    return text


def _table(doc: Any, config: PytestConfig) -> tuple[Any, bool]:
    """The table the settings go in, made when missing; and whether it was."""
    import tomlkit

    if config.path.name in TOML_NAMES:
        if "pytest" not in doc:
            doc["pytest"] = tomlkit.table()
            return doc["pytest"], True
        return doc["pytest"], False
    if "tool" not in doc:
        if doc.as_string().strip() and not doc.as_string().endswith("\n\n"):
            doc.add(tomlkit.nl())
        doc["tool"] = tomlkit.table(is_super_table=True)
    tool = doc["tool"]
    if "pytest" not in tool:
        tool["pytest"] = tomlkit.table(is_super_table=True)
    pytest_table = tool["pytest"]
    if config.style == "native":
        return pytest_table, False
    if "ini_options" not in pytest_table:
        pytest_table["ini_options"] = tomlkit.table()
        return pytest_table["ini_options"], True
    return pytest_table["ini_options"], False


def _number(value: Any) -> int | float:
    number = float(value)
    return int(number) if number.is_integer() else number
