#!/usr/bin/env python3
"""Non-test lines of each crate at a revision: every line of src/**/*.rs before the file's
first `#[cfg(test)]`, test modules in files of their own (`tests.rs`, `tests_*.rs`) left out; the `code` column leaves out blank lines and
comments too.

    scripts/loc.py [REV] [CRATE ...]   # default: HEAD, every gc-* crate
"""
import subprocess
import sys

rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
crates = sys.argv[2:] or [
    "gc-cli", "gc-runtime", "gc-output", "gc-core", "gc-k8s", "gc-store"]
for crate in crates:
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, f"{crate}/src"],
                            capture_output=True, text=True, check=True).stdout.split()
    lines = code = 0
    for path in listed:
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".rs") or name == "tests.rs" or name.startswith("tests_"):
            continue
        text = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True,
                              check=True).stdout
        for line in text.splitlines():
            if line.strip().startswith("#[cfg(test)]"):
                break
            lines += 1
            if line.strip() and not line.strip().startswith("//"):
                code += 1
    print(f"{crate:12} {lines:6} lines {code:6} code")
