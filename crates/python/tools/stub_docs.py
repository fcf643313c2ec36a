"""Rewrites the "Keywords" part of the docstrings of match_template, find_peaks and solve in
monomorph/__init__.pyi from the command's own ``--help`` (read through the installed package,
as ``help()`` shows it at run time), and lists the flags missing from a stub's signature (add
those by hand, with their types). Run it after a flag is added or its help changes:

    python crates/python/tools/stub_docs.py

tests/test_flags.py fails until the stubs cover every flag.
"""

import ast
import re
import sys
import textwrap
from pathlib import Path

import monomorph

PYI = Path(__file__).resolve().parents[1] / "python" / "monomorph" / "__init__.pyi"
SUBS = {"match_template": "match", "find_peaks": "peaks", "solve": "solve"}


def keywords(sub: str) -> str:
    lines = [f"    Keywords (the flags of `monomorph {sub}`):", ""]
    for name, _, text in monomorph._flags(sub):
        lines += textwrap.wrap(
            f"{name}: {text}", width=100, initial_indent="    ", subsequent_indent="        "
        )
    return "\n".join(lines)


def main() -> int:
    text = PYI.read_text()
    for fn, sub in SUBS.items():
        start = text.index(f"def {fn}(")
        open_ = text.index('    """', start) + len('    """')
        close = text.index('"""', open_)
        doc = text[open_:close]
        head = doc.split("\n\n    Keywords")[0].rstrip()
        text = text[:open_] + head + "\n\n" + keywords(sub) + "\n    " + text[close:]
    PYI.write_text(text)
    tree = ast.parse(text)
    missing = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in SUBS:
            a = node.args
            have = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            for name, _, _ in monomorph._flags(SUBS[node.name]):
                if name not in have:
                    print(f"{node.name}: {name} is not in the signature", file=sys.stderr)
                    missing += 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
