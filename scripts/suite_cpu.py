"""Where the test suite's CPU goes, the Python subprocesses it starts included.

pytest's --durations times each test's wall clock in its worker; a test that launches
detached jobs or CLI subprocesses spends most of its CPU in other processes, and on the
2-core CI machine CPU, not wall time, is what the suite runs out of. This installs a
`.pth` hook in the venv: every Python process started while LC_CPU_ACCOUNT names a file
appends one JSON line there at exit -- its CPU seconds, argv, and the test it ran under
(pytest's PYTEST_CURRENT_TEST, which subprocesses inherit). SIGKILLed processes are lost.

    python scripts/suite_cpu.py install
    LC_CPU_ACCOUNT=/tmp/cpu.jsonl .venv/bin/python -m pytest -q -n 2 --dist loadgroup
    python scripts/suite_cpu.py report /tmp/cpu.jsonl     # per test: subprocess CPU, count
    python scripts/suite_cpu.py remove
"""

from __future__ import annotations

import collections
import json
import sys
import sysconfig
from pathlib import Path

HOOK = Path(sysconfig.get_paths()["purelib"]) / "zz_lactchain_cpu_account.pth"
# One line: a .pth line that starts with `import` is executed at every interpreter start.
LINE = ("import os; exec(\"import atexit\\ndef _lc_cpu():\\n import json, os, sys\\n t = os.times()\\n "
        "open(os.environ['LC_CPU_ACCOUNT'], 'a').write(json.dumps({'pid': os.getpid(), 'cpu': t.user + t.system, "
        "'argv': sys.argv[:6], 'test': os.environ.get('PYTEST_CURRENT_TEST', '')}) + '\\\\n')\\n"
        "atexit.register(_lc_cpu)\") if os.environ.get('LC_CPU_ACCOUNT') else None\n")


def report(path: str, top: int = 40) -> None:
    """Per test: the CPU of the subprocesses started under it (workers themselves left out)."""
    by_test: dict[str, list[float]] = collections.defaultdict(list)
    total = workers = 0.0
    rows = {}  # by pid: a venv reached through a symlink may run the hook twice
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        rows[row["pid"], row["argv"][0] if row["argv"] else ""] = row
    for row in rows.values():
        if not row["test"]:  # pytest and its workers (the variable is unset between tests)
            workers += row["cpu"]
            continue
        test = row["test"].rsplit(" (", 1)[0]
        by_test[test].append(row["cpu"])
        total += row["cpu"]
    print(f"subprocess CPU {total:.0f} s in {sum(map(len, by_test.values()))} processes; "
          f"worker / untagged processes {workers:.0f} s")
    for test, cpus in sorted(by_test.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print(f"{sum(cpus):7.1f} s {len(cpus):3d} proc  {test}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        HOOK.write_text(LINE)
        print(f"installed {HOOK}")
    elif argv[:1] == ["remove"]:
        HOOK.unlink(missing_ok=True)
        print(f"removed {HOOK}")
    elif argv[:1] == ["report"] and len(argv) == 2:
        report(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
