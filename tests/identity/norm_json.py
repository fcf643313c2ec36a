#!/usr/bin/env python3
"""Compares two run.json / list.json files without what measures time or memory (timings,
seconds, peak memory, progress report counts) or names the binary (command[0]). Which rank
ran an item of a list (`ran[].rank`, `ran[].device`) is decided at run time (items go to the
first free rank), also a one-target run's (so `mpi.rotations_per_rank` is dropped too), as is,
with LIST=1, which device thread ran it (`devices.workers[]`:
`device`, `threads`); the rotation ranges stay."""
import json, os, re, sys

DROP = re.compile(r"(_s|seconds|timings|peak_memory_bytes|progress|wall_s|rotations_per_rank)$")
LIST = os.environ.get("LIST") == "1"


def norm(v, parent=""):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if DROP.search(k):
                continue
            if parent == "ran" and k in ("rank", "device"):
                continue
            if LIST and parent == "workers" and k in ("device", "threads"):
                continue
            out[k] = norm(x, k)
        return out
    if isinstance(v, list):
        return [norm(x, parent) for x in v]
    return v


a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    if isinstance(d.get("command"), list) and d["command"]:
        d["command"][0] = "monomorph"
a, b = norm(a), norm(b)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print(f"    {k}: {json.dumps(a.get(k))[:200]} != {json.dumps(b.get(k))[:200]}")
    sys.exit(1)
