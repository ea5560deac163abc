"""One-way flow: tui -> lactchain -> envs/models. The library never imports the console."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import lactchain


def test_library_never_imports_textual_or_tui():
    modules = [m.name for m in pkgutil.walk_packages(lactchain.__path__, "lactchain.") if not m.name.endswith("__main__")]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui'))\n"
        "print(','.join(bad))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert len(modules) > 20
    assert res.stdout.strip() == "", f"the library pulled in {res.stdout.strip()}"
