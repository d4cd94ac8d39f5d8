"""The console entry point, kept free of imports so that Ctrl-C while the CLI is still being
imported is exit 130 with one line, like Ctrl-C at any later moment."""

import sys


def main() -> None:
    try:
        from .cli import run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("npu-doctor: interrupted\n")
        sys.exit(130)
