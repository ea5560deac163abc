"""All registry access from the TUI goes through one background thread.

The registry is SQLite: a call is usually a few milliseconds, but a writer (a
running job) can hold the lock for longer, and a sqlite3 connection belongs to
the thread that opened it. So the TUI opens its `Registry` lazily *inside* a
single-thread executor and sends every call there: the event loop never blocks
(`await client.call(...)`), calls keep their order (a label, then its undo), and
thread workers can use `client.call_sync(...)`.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class RegistryUnavailable(RuntimeError):
    """The registry could not be opened (missing module, unreadable file, ...)."""


def default_factory(db_path: Path | str | None) -> Callable[[], Any]:
    def open_registry() -> Any:
        try:
            from lactchain.runs.registry import Registry
        except ImportError as exc:  # the module lands in another issue
            raise RegistryUnavailable(f"lactchain.runs.registry is not available ({exc})") from exc
        # Browsing works on read-only media or a full disk too (writes then say why they failed).
        return Registry.open_for_reading(db_path)

    return open_registry


class RegistryClient:
    """Serialises registry calls onto one thread that owns the connection."""

    def __init__(self, factory: Callable[[], Any], label: str = "registry"):
        self._factory = factory
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lactchain-registry")
        self._registry: Any = None
        self._lock = threading.Lock()
        self.label = label
        self.error: str | None = None

    def _get(self) -> Any:
        if self._registry is None:
            try:
                self._registry = self._factory()
            except RegistryUnavailable as exc:
                self.error = str(exc)
                raise
            except Exception as exc:  # noqa: BLE001 - reported to the user as text
                self.error = f"cannot open the registry: {exc}"
                raise RegistryUnavailable(self.error) from exc
            self.error = None
        return self._registry

    def _run(self, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
        return fn(self._get(), *args, **kwargs)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(registry, *args, **kwargs)` on the registry thread, awaited."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, fn, args, kwargs)

    def call_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Blocking variant for thread workers (never call it on the event loop)."""
        return self._executor.submit(self._run, fn, args, kwargs).result()

    def close(self) -> None:
        def _close() -> None:
            reg, self._registry = self._registry, None
            closer = getattr(reg, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:  # noqa: BLE001
                    pass

        try:
            self._executor.submit(_close)
        except RuntimeError:
            pass
        self._executor.shutdown(wait=False, cancel_futures=False)
