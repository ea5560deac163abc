"""sqlite-utils, imported without pandas.

sqlite-utils imports pandas whenever it is installed (datasets and TRL install it here)
only to map `pandas.Timestamp` to a column type, a value the registry never stores. That
import is ~0.45 s of every process that opens the registry: each CLI call, each job
process, the console's start. So pandas is hidden while sqlite-utils loads (its own
`ImportError` path, `pd = None`) and imports normally afterwards, for whoever needs it.
Import sqlite-utils through this module (`from lactchain.runs.sqlite_lib import
sqlite_utils`) so the first import happens here, on the importing thread."""

from __future__ import annotations

import sys

if "sqlite_utils" not in sys.modules and "pandas" not in sys.modules:
    sys.modules["pandas"] = None  # type: ignore[assignment]  # sqlite-utils: "pandas is not installed"
    try:
        import sqlite_utils
    finally:
        if sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]

import sqlite_utils  # noqa: E402  # the same module object either way
from sqlite_utils.db import NotFoundError  # noqa: E402

__all__ = ["NotFoundError", "sqlite_utils"]
