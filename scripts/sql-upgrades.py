#!/usr/bin/env python3
"""Writes the upgrade scripts of sql/upgrade/ with their includes expanded, so that each SQL
object is written once: in sql/*.sql (hand-written objects) or in the Rust sources (functions
pgrx generates), and never copied into an upgrade script by hand.

    scripts/sql-upgrades.py GENERATED_INSTALL_SCRIPT OUT_DIR

A template is an ordinary upgrade script in which a line may be one of:

    \\ir FILE            FILE (relative to the template) as it is
    \\ir-replace FILE    FILE with each CREATE FUNCTION, VIEW or TRIGGER at the start of a line
                        made CREATE OR REPLACE: what an upgrade does to an object that exists
    \\generated NAME     every CREATE FUNCTION "NAME"(...) statement of the install script that
                        cargo pgrx generated from the Rust sources (GENERATED_INSTALL_SCRIPT)
    \\generated-replace NAME   the same, as CREATE OR REPLACE FUNCTION

Upgrade scripts of releases before the first template (pg_snowflake--0.1.0--0.2.0.sql) are
plain files in sql/, copied as they are: they are history and do not change.
"""
import pathlib
import re
import sys

REPLACEABLE = re.compile(r"^CREATE (FUNCTION|VIEW|TRIGGER)\b", re.MULTILINE)


def generated_functions(script: str, name: str) -> str:
    """The CREATE FUNCTION statements of `name` in pgrx's output, with the comment lines above
    each (where in the Rust sources it comes from)."""
    lines = script.splitlines()
    found = []
    for i, line in enumerate(lines):
        if re.match(rf'^CREATE\s+FUNCTION "{re.escape(name)}"\(', line):
            start = i
            while start > 0 and lines[start - 1].startswith("--"):
                start -= 1
            end = i
            while not lines[end].rstrip().endswith(";"):
                end += 1
            found.append("\n".join(lines[start : end + 1]))
    if not found:
        sys.exit(f"sql-upgrades: no function {name} in the generated install script")
    return "\n\n".join(found)


def expand(template: pathlib.Path, generated: str) -> str:
    out = []
    for line in template.read_text().splitlines():
        directive, _, arg = line.partition(" ")
        if directive in ("\\ir", "\\ir-replace"):
            text = (template.parent / arg.strip()).read_text().rstrip("\n")
            if directive == "\\ir-replace":
                text = REPLACEABLE.sub(r"CREATE OR REPLACE \1", text)
            out.append(f"-- {arg.strip()}\n{text}")
        elif directive in ("\\generated", "\\generated-replace"):
            text = generated_functions(generated, arg.strip())
            if directive == "\\generated-replace":
                text = re.sub(r"^CREATE\s+FUNCTION", "CREATE OR REPLACE FUNCTION", text,
                              flags=re.MULTILINE)
            out.append(text)
        elif directive.startswith("\\") and directive != "\\echo":
            sys.exit(f"sql-upgrades: {template}: unknown directive {directive}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    generated = pathlib.Path(sys.argv[1]).read_text()
    out_dir = pathlib.Path(sys.argv[2])
    templates = sorted((pathlib.Path(__file__).parent.parent / "sql" / "upgrade").glob("*.sql"))
    for template in templates:
        (out_dir / template.name).write_text(expand(template, generated))


if __name__ == "__main__":
    main()
