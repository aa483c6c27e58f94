"""Every shell and Python block of the README and docs/ says how the documents' test treats it:
run, written to a file, served, run in the page's Python process, or (with a reason) only
checked or not run. A new example is then run by the test, not found broken by a reader."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from .test_docs_run import PAGES, ROOT, RUNNABLE, Block, blocks


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def shell_text(text: str) -> str:
    """A console block's commands (its ``$ `` lines), or a script as it is."""
    if not text.startswith("$ "):
        return text
    return "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))


def check_fragment(block: Block, where: str) -> None:
    """A fragment is not run, but its syntax must hold."""
    assert block.marker is not None
    if block.language in ("python", "py"):
        try:
            compile(
                block.marker.text,
                where,
                "exec",
                flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
        except SyntaxError as exc:
            raise AssertionError(f"{where}: not valid Python: {exc}") from exc
        return
    done = subprocess.run(
        ["bash", "-n"], input=shell_text(block.marker.text), capture_output=True, text=True
    )
    assert done.returncode == 0, f"{where}: not valid shell: {done.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_runnable_block_is_marked(page: Path) -> None:
    for block in blocks(page.read_text(encoding="utf-8")):
        where = f"{page_id(page)}:{block.line}"
        if block.language not in RUNNABLE:
            continue
        assert block.marker is not None, (
            f"{where}: a {block.language} block without a doc-test marker: mark it "
            "run, file, serve or python so the test runs it, or fragment/skip with the reason"
        )
        if block.marker.what in ("fragment", "skip"):
            assert block.marker.arg, f"{where}: {block.marker.what} needs its reason"
        if block.marker.what == "fragment":
            check_fragment(block, where)
        if block.marker.what == "python":
            assert block.language in ("python", "py"), f"{where}: python marks a Python block"


def test_a_marker_reads_its_block() -> None:
    page = "\n".join(
        [
            "<!-- doc-test: fragment needs a Django project -->",
            "```python",
            "Order.objects.create()",
            "```",
            "```bash",
            "echo unmarked",
            "```",
        ]
    )
    first, second = blocks(page)
    assert first.marker is not None
    assert first.marker.what == "fragment"
    assert first.marker.arg == "needs a Django project"
    assert first.language == "python"
    assert first.marker.text == "Order.objects.create()"
    assert second.marker is None
    assert second.language == "bash"
