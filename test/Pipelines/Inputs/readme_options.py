"""Checks that README.md's table of each pipeline's options names exactly
the options that `swin-opt --help` (on standard input) lists for it
(test/Pipelines/readme-options.test)."""

import re
import sys


def help_options(help_text, pipeline):
    """The options that `--help` lists under `--PIPELINE`."""
    options, indent = set(), None
    for line in help_text.splitlines():
        match = re.match(r"^( *)--([\w-]+)", line)
        if not match:
            continue
        depth = len(match[1])
        if indent is None:
            if match[2] == pipeline:
                indent = depth
        elif depth > indent:
            options.add(match[2])
        else:
            break
    return options


def readme_options(readme, pipeline):
    """The first column of the table after "The options of `PIPELINE`"."""
    heading = f"The options of `{pipeline}`"
    if heading not in readme:
        return set()
    table = readme.split(heading, 1)[1].split("\n\n")[1]
    return set(re.findall(r"^\| `([\w-]+)` \|", table, re.MULTILINE))


def main():
    readme = open(sys.argv[1]).read()
    help_text = sys.stdin.read()
    failed = False
    for pipeline in sys.argv[2:]:
        listed = help_options(help_text, pipeline)
        documented = readme_options(readme, pipeline)
        if not listed or not documented:
            print(f"{pipeline}: no options found (listed {sorted(listed)}, "
                  f"documented {sorted(documented)})")
            failed = True
            continue
        for option in sorted(listed - documented):
            print(f"{pipeline}: README.md does not document {option}")
        for option in sorted(documented - listed):
            print(f"{pipeline}: README.md documents {option}, which it has "
                  "not")
        failed |= listed != documented
        if listed == documented:
            print(f"{pipeline}: README.md documents its "
                  f"{len(listed)} options")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
