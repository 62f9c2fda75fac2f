#!/usr/bin/env python3
"""Fails when a tracked C or C++ source file is over 600 lines, or a function
in one is over 80 (CONTRIBUTING.md: small files with one purpose, functions
that fit a screen).

A function is a brace block at namespace or class level whose opening line
(or the lines of its signature before it) has a parameter list: its length
counts from the signature's first line to the closing brace. Lambdas and
blocks inside a function count toward the function that holds them. Comments,
string and character literals are ignored when matching braces.

  check_sizes.py GIT [FILE...]   (without files: every tracked source file)
  check_sizes.py --max-lines N --max-function N ...   (other limits)
"""
import argparse
import re
import subprocess
import sys

SOURCES = ["*.c", "*.h", "*.cpp", "*.hpp", "*.cu", "*.cuh"]
# A block opened after these words is a scope, not a function.
SCOPES = re.compile(r"\b(namespace|class|struct|union|enum|extern\s+\"C\")\b[^;()]*$")


def code_only(text):
    """The text with comments and literals blanked, line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            end = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text, limit):
    """(first line, lines, signature) of each function over `limit` lines."""
    lines = code_only(text).split("\n")
    found = []
    stack = []  # per open brace: (kind, first line of the function or None)
    signature_start = None  # first line of the statement being read at scope level
    for number, line in enumerate(lines, 1):
        in_function = any(kind == "function" for kind, _ in stack)
        stripped = line.strip()
        if not in_function and signature_start is None and stripped and not stripped.startswith("#"):
            signature_start = number
        for c in line:
            if c == "{":
                if in_function:
                    stack.append(("block", None))
                    continue
                start = signature_start or number
                head = " ".join(l.strip() for l in lines[start - 1:number])
                head = head[: head.rfind("{")] if "{" in head else head
                is_function = "(" in head and not SCOPES.search(head.split("(")[0]) and "=" not in head.split("(")[0]
                stack.append(("function" if is_function else "scope", start if is_function else None))
                in_function = is_function
                signature_start = None
            elif c == "}":
                if not stack:
                    continue
                kind, start = stack.pop()
                if kind == "function":
                    length = number - start + 1
                    if length > limit:
                        found.append((start, length, " ".join(lines[start - 1].split())[:90]))
                    in_function = False
                if not any(k == "function" for k, _ in stack):
                    signature_start = None
            elif c == ";" and not in_function:
                signature_start = None
        if not in_function and stripped.startswith("#"):
            signature_start = None
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("git")
    parser.add_argument("files", nargs="*")
    parser.add_argument("--max-lines", type=int, default=600)
    parser.add_argument("--max-function", type=int, default=80)
    args = parser.parse_args()
    files = args.files
    if not files:
        try:
            files = subprocess.run([args.git, "ls-files", *SOURCES], check=True, capture_output=True,
                                   text=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            print("SKIPPED: not a git checkout, so the tracked files are unknown")
            return 77
    problems = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if count > args.max_lines:
            problems.append(f"{path}: {count} lines (at most {args.max_lines}): split it by purpose")
        for start, length, head in long_functions(text, args.max_function):
            problems.append(f"{path}:{start}: a function of {length} lines (at most {args.max_function}): {head}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} over the limits above; split them by what they do")
        return 1
    print(f"{len(files)} files within {args.max_lines} lines, their functions within {args.max_function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
