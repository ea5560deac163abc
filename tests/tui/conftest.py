"""Fixtures for the TUI tests: a temp registry, app factories, the tiny actor.

Most tests drive the app with `OracleActor` (no model: deterministic and instant);
the step test uses the real tiny actor (`Actor.load("tiny")`, built once per session).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from lactchain.runs.registry import Registry
from tui.app import LactChainApp
from tui.models import OracleActor



@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "registry.db"


@pytest.fixture
def registry(db_path: Path):
    reg = Registry(db_path)
    yield reg
    reg.close()


@pytest.fixture
def make_app(db_path: Path) -> Callable[..., LactChainApp]:
    def factory(**kwargs: Any) -> LactChainApp:
        kwargs.setdefault("actor", OracleActor())
        kwargs.setdefault("load_models", False)
        return LactChainApp(db_path=db_path, actor_spec=kwargs.pop("actor_spec", "oracle"), **kwargs)

    return factory


@pytest.fixture(scope="session")
def tiny_actor():
    from lactchain.models.actor import Actor

    return Actor.load("tiny")


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch):
    """Deterministic run ids (<kind>-00000001, ...) for snapshot data."""
    counter = iter(range(1, 10_000))
    monkeypatch.setattr("lactchain.runs.registry.uuid.uuid4", lambda: uuid.UUID(int=next(counter) << 96))
