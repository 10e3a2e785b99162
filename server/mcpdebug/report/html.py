"""`mcpdebug report RUN --html PATH` and `pytest --mcp-debug-html=PATH`: a run as one HTML file.

Self-contained: the CSS, the script and the charts (SVG) are inline, and nothing is fetched, so the
file opens from disk, from a CI artifact or an e-mail alike. Every section is written in the page
and reads without JavaScript (the test table, problems first; each test's anchor; cards as
`<details>`); the script only adds the table's sorting and search, clickable rows and the
expand/collapse-all buttons. The data is `html_data.build`'s, read from the store as the MCP tools
read it; jinja2 escapes every value.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from mcpdebug.report import html_data
from mcpdebug.store import Store

TEMPLATES = Path(__file__).parent / "templates"


def render(data: dict[str, Any]) -> str:
    import jinja2

    from pytest_mcpdebug import __version__

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return environment.get_template("report.html.j2").render(d=data, version=__version__)


def write(store: Store, run: dict[str, Any], path: Path) -> int:
    """Write the report of ``run`` to ``path`` (whole or not at all); returns its size in bytes."""
    text = render(html_data.build(store, run)).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return len(text)
