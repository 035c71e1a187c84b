"""Every Python block of the README runs as written, each in a fresh interpreter, and prints what
its comments say it prints (a ``print(...)   # text`` line: the output has a line that is text)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def _said(block: str) -> list[str]:
    """What the block's ``print(...)   # text`` lines say they print."""
    said = re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", block, re.MULTILINE)
    return [m.group(1).strip() for m in said]


def test_the_readme_has_python_blocks():
    assert len(_BLOCKS) >= 5


@pytest.mark.parametrize("block", _BLOCKS, ids=[f"block-{k}" for k in range(len(_BLOCKS))])
def test_a_readme_block_runs_as_written(block, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(block)
    env = {k: v for k, v in os.environ.items() if k != "CYLOOP_NATIVE_OFF"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    for text in _said(block):
        assert text in lines, f"the README says a line prints {text!r}; it printed {lines}"
