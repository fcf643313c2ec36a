"""The README's Python example runs as written (in a temporary folder)."""

import re

import numpy as np

from conftest import ROOT


def test_readme_example(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it from Python", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(code) == 1
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code[0], "README.md", "exec"), scope)
    # The planted copy is the best peak, and the STAR file holds the five peaks.
    assert tuple(scope["peaks"].positions[0]) == (18, 28, 38)
    star = (tmp_path / "particles.star").read_text()
    assert "_rlnCoordinateX" in star
    assert isinstance(scope["result"].scores, np.ndarray)
