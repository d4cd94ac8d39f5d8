"""The console entry point, kept free of imports so that Ctrl-C while the CLI is still being
imported is exit 130 with one line, like Ctrl-C at any later moment."""

import gc
import sys


def main() -> None:
    # Start-up builds tens of thousands of objects that live until exit (click's commands, the
    # configuration read back from the cache); the cyclic collector would walk them again and
    # again (~5 ms of a 100 ms check). It stays off until the configuration is loaded, which
    # then is frozen out of its reach (cli.common.config_loaded); a command that loads none
    # is short and runs without it.
    gc.disable()
    try:
        from .cli import run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("npu-doctor: interrupted\n")
        sys.exit(130)
