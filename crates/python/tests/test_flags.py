"""Every long flag of `monomorph match`, `peaks` and `solve` (as their --help lists them: the
binary at MONOMORPH_BIN, else the package's own copy of the help) is a keyword of the Python
function, validated by the command (its errors name the keyword in snake_case), and is in the
`.pyi` stub's signature with a docstring line (and in help()'s docstring)."""

import ast
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import monomorph
from conftest import fixture

OPTION = re.compile(r"^  (?:-[A-Za-z], |    )--([a-z0-9][a-z0-9-]*)(.*)$")
# The command's own help and version; --quiet/--verbose (no log lines embedded).
NOT_KEYWORDS = {"help", "version", "quiet", "verbose"}
FUNCTIONS = {"match": "match_template", "peaks": "find_peaks", "solve": "solve"}
# Flags that are the functions' positional parameters.
POSITIONAL = {"match": {"target", "template"}, "peaks": {"scores"}, "solve": {"rhs"}}
PYI = Path(monomorph.__file__).with_name("__init__.pyi")
SOURCE_PYI = Path(__file__).resolve().parents[1] / "python" / "monomorph" / "__init__.pyi"


def help_text(sub):
    binary = os.environ.get("MONOMORPH_BIN")
    if binary:
        return subprocess.run([binary, sub, "--help"], capture_output=True, text=True, check=True).stdout
    return monomorph._native.help_text(sub)


def flags(sub):
    """(keyword, takes a value) for every long flag in `monomorph SUB --help`."""
    found = []
    for line in help_text(sub).splitlines():
        m = OPTION.match(line)
        if m and m.group(1) not in NOT_KEYWORDS:
            found.append((m.group(1).replace("-", "_"), m.group(2).strip().startswith("<")))
    return found


CASES = [(sub, name, takes) for sub in FUNCTIONS for name, takes in flags(sub)]


def test_the_help_lists_the_flags_we_know():
    # The parser itself: a few flags of each command, including refinement and list flags.
    names = {sub: {n for s, n, _ in CASES if s == sub} for sub in FUNCTIONS}
    assert {"target", "template", "orientations_uncertainty", "orientations_inplane_range",
            "target_list", "trace", "tilt_angles", "memory_limit"} <= names["match"]
    assert {"scores", "min_distance", "caller", "tophat_bins", "trace"} <= names["peaks"]
    assert {"rhs", "laplacian", "max_iter", "trace"} <= names["solve"]
    assert len(CASES) > 100


def _call(sub, name, value):
    """The function of `sub` on small valid inputs, with keyword `name=value`."""
    if sub == "match":
        base = {"target": fixture("matching/2d_cc/target.npy"),
                "template": fixture("matching/2d_cc/template.npy"), "score": "cc"}
        base[name] = value
        return monomorph.match_template(**base)
    if sub == "peaks":
        base = {"scores": fixture("matching/2d_cc/scores.npy")}
        base[name] = value
        return monomorph.find_peaks(**base)
    base = {"rhs": np.ones((1, 4))}
    if name not in ("matrix", "csr", "laplacian"):
        base["laplacian"] = (4,)
    base[name] = value
    return monomorph.solve(**base)


@pytest.mark.parametrize("sub,name,takes", CASES, ids=[f"{s}-{n}" for s, n, _ in CASES])
def test_every_flag_is_a_keyword_the_command_validates(sub, name, takes, tmp_path, monkeypatch):
    """A deliberately bad value (a switch: True) reaches the command's own checks: never an
    unknown argument, and an error names the keyword in snake_case, not as a flag."""
    monkeypatch.chdir(tmp_path)  # anything a flag writes lands here
    value = "@@bad@@" if takes else True
    try:
        _call(sub, name, value)
    except (monomorph.InputError, monomorph.RunError) as e:
        msg = str(e)
        assert "unexpected argument" not in msg, msg
        assert not re.search(r"(?<![\w-])--[a-z]", msg), f"a flag spelled as on the command line: {msg}"
        if takes:
            # The bad value is refused naming the keyword, or the flag was parsed and needs
            # another one (clap's `requires`, naming that one).
            assert re.search(rf"\b{name}\b", msg) or "required arguments were not provided" in msg, msg
    except TypeError as e:  # a keyword Python itself refused
        pytest.fail(f"{name}: {e}")


def _stub_functions():
    tree = ast.parse(PYI.read_text())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("sub", list(FUNCTIONS))
def test_every_flag_is_in_the_stub_with_a_docstring_line(sub):
    assert PYI.read_text() == SOURCE_PYI.read_text() or not SOURCE_PYI.exists()
    fn = _stub_functions()[FUNCTIONS[sub]]
    a = fn.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    doc = ast.get_docstring(fn) or ""
    runtime = getattr(monomorph, FUNCTIONS[sub]).__doc__ or ""
    missing = []
    for name, _ in flags(sub):
        if name not in params:
            missing.append(f"{name} (signature)")
        line = re.compile(rf"^\s*{name}: \S", re.M)
        if not line.search(doc):
            missing.append(f"{name} (.pyi docstring)")
        if not line.search(runtime):
            missing.append(f"{name} (help() docstring)")
    assert not missing, f"{FUNCTIONS[sub]}: {missing}"
