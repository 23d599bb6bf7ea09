#!/usr/bin/env python3
"""Layout gate for crates/cairn/src: file sizes, function lengths and module import cycles.

    python3 .ci/layout.py            # report and fail on a breach
    python3 .ci/layout.py --list N   # also list the N longest functions

Limits (ARCHITECTURE.md, "Layout rules"): a source file holds at most FILE_LINES_MAX lines
including its inline tests; a function at most FUNCTION_LINES_MAX lines, unless the line
before it carries a `// layout: long function because ...` comment; the crate's top-level
modules (and the files inside a folder module) import each other without cycles.
Functions are found by text (`fn name` to its matching brace), which is enough for rustfmt'd
code; strings containing unbalanced braces would confuse it (none exist today).
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "cairn", "src")
FILE_LINES_MAX = 900
FUNCTION_LINES_MAX = 100
FN_RE = re.compile(r"^\s*(pub(\([a-z:]+\))?\s+)?(const\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")
USE_RE = re.compile(r"\bcrate::(\w+)(?:::(\w+))?")


def rust_files():
    for directory, _, names in os.walk(ROOT):
        for name in sorted(names):
            if name.endswith(".rs"):
                yield os.path.join(directory, name)


def functions(path, lines):
    """Yields (name, first line number, length) of every fn with a body."""
    for index, line in enumerate(lines):
        match = FN_RE.match(line)
        if not match:
            continue
        depth, started = 0, False
        for end in range(index, len(lines)):
            text = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])\'|//.*', "", lines[end])
            depth += text.count("{") - text.count("}")
            if "{" in text:
                started = True
            if not started and text.rstrip().endswith(";"):
                break  # a declaration without a body
            if started and depth <= 0:
                excused = index > 0 and "layout: long function because" in lines[index - 1]
                yield match.group(6), index + 1, end - index + 1, excused
                break


def module_of(path):
    relative = os.path.relpath(path, ROOT)
    parts = relative.replace(".rs", "").split(os.sep)
    return parts[0]


def cycles(graph):
    found, state = [], {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == 1:
                found.append(stack[stack.index(child):] + [child])
            elif child not in state:
                visit(child, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def main():
    listing = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--list" else 0
    failures, all_functions = [], []
    graph = defaultdict(set)
    for path in rust_files():
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        relative = os.path.relpath(path, ROOT)
        if len(lines) > FILE_LINES_MAX:
            failures.append(f"{relative}: {len(lines)} lines (max {FILE_LINES_MAX})")
        for name, start, length, excused in functions(path, lines):
            all_functions.append((length, f"{relative}:{start} {name}"))
            if length > FUNCTION_LINES_MAX and not excused:
                failures.append(f"{relative}:{start}: fn {name} is {length} lines (max {FUNCTION_LINES_MAX})")
        source = module_of(path)
        if source in ("lib", "testing") or os.path.basename(path) in ("tests.rs", "picker_tests.rs"):
            continue  # tests may reach anywhere; the rule is about the engine's own layering
        for line in lines:
            if line.strip() == "#[cfg(test)]":
                break  # inline test modules sit at the end of a file
            if line.lstrip().startswith("//"):
                continue
            for target, _ in USE_RE.findall(line):
                is_module = os.path.exists(os.path.join(ROOT, target)) or os.path.exists(
                    os.path.join(ROOT, target + ".rs")
                )
                if is_module and target != source:
                    graph[source].add(target)
    for cycle in cycles(graph):
        failures.append("import cycle between top-level modules: " + " -> ".join(cycle))
    all_functions.sort(reverse=True)
    print(f"{len(all_functions)} functions; longest: " + ", ".join(f"{n} ({l})" for l, n in all_functions[:3]))
    for length, name in all_functions[:listing]:
        print(f"  {length:4} {name}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
