"""The ``skillsearch`` command's entry point (the console script) and ``python -m skillsearch``, for a host or
a shell that has the interpreter but not the script on its ``PATH`` (an MCP host's ``"command": "python",
"args": ["-m", "skillsearch", "mcp"]``).

Nothing but this file and the package's (lazy) ``__init__`` runs before :func:`main`, so a Ctrl-C while the
command's modules load (about half a second) ends it as a Ctrl-C later does, not with a traceback of imports."""

import sys

EXIT_INTERRUPTED = 130


def main() -> int:
    """Load the command line and run it. A Ctrl-C before the command could take it: ``interrupted`` on stderr,
    exit code 130, and under ``--json`` the ``INTERRUPTED`` object its contract promises on stdout."""
    try:
        from skillsearch.cli import main as run
    except KeyboardInterrupt:
        _interrupted_while_loading()
        return EXIT_INTERRUPTED
    return run()


def _interrupted_while_loading() -> None:
    # Not ``cli.usage.wants_json``: importing the ``cli`` package is the loading the Ctrl-C stopped.
    from skillsearch.core.errors import StoppedBySignal, error_json

    print("interrupted", file=sys.stderr)
    argv = sys.argv[1:]
    if "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        print(error_json(StoppedBySignal("stopped by Ctrl-C (SIGINT) before the command started: nothing was done",
                                         {"signal": "SIGINT"})))


if __name__ == "__main__":
    sys.exit(main())
