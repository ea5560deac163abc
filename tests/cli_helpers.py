"""Run the real `lactchain` entry point in this process (no interpreter start-up per
call): exit code, stdout, stderr. Subprocesses stay for what needs one (detached jobs,
signals, a fresh interpreter)."""

from __future__ import annotations

import sys


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:  # noqa: ANN001
    """An exception escaping main() is what a user would see as a traceback: it fails the caller."""
    from lactchain.cli import main

    old = sys.argv
    sys.argv = ["lactchain", *[str(a) for a in argv]]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


def run_cli_uncaptured(argv: list[str]) -> tuple[int, str, str]:
    """`run_cli` where pytest's capsys is not at hand (a module-scoped fixture): stdout and
    stderr caught here."""
    import contextlib
    import io

    class _Caught:  # what run_cli reads back, in capsys's shape
        def __init__(self) -> None:
            self.out, self.err = io.StringIO(), io.StringIO()

        def readouterr(self):  # noqa: ANN202
            return type("Read", (), {"out": self.out.getvalue(), "err": self.err.getvalue()})

    caught = _Caught()
    with contextlib.redirect_stdout(caught.out), contextlib.redirect_stderr(caught.err):
        return run_cli(argv, caught)


def wait_until(predicate, timeout: float = 600.0, every: float = 0.2):  # noqa: ANN001, ANN201
    """The predicate's first truthy value, polled every `every` s; AssertionError after `timeout` s
    (a detached job on a loaded 2-core machine can take minutes)."""
    import time

    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")
