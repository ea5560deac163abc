"""Messages that workers post to the UI (dataclass messages, as in posting).

Worker threads never touch widgets: they post one of these (post_message is
thread-safe) and a handler on the event loop updates the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from tui.lab_session import Candidate, Snapshot, StepRecord


@dataclass
class ModelProgress(Message):
    role: str  # "actor" | "critic"
    text: str
    fraction: float | None = None


@dataclass
class ModelLoaded(Message):
    role: str
    model: Any
    label: str
    seconds: float
    adapter: str | None = None  # the actor's adapter, as asked for (a run id or a path)
    spec: str | None = None  # the actor's preset or path, as asked for


@dataclass
class ModelFailed(Message):
    role: str
    error: str


@dataclass
class StepStarted(Message):
    prompt: str
    state_text: str
    episode: int = 0  # the Lab's episode token: a message of one it stopped since is ignored


@dataclass
class ActorText(Message):
    text: str
    episode: int = 0  # the Lab's episode token: a message of one it stopped since is ignored


@dataclass
class StepFinished(Message):
    record: StepRecord
    episode: int = 0  # the Lab's episode token: a message of one it stopped since is ignored


@dataclass
class EpisodeStopped(Message):
    reason: str
    snapshot: Snapshot
    episode: int = 0  # the Lab's episode token: a message of one it stopped since is ignored


@dataclass
class CandidatesReady(Message):
    value: float | None
    rows: list[Candidate]
    critic_label: str | None
    state: Any = None  # the state they were sampled at (the table is stale once the agent moves)


@dataclass
class JobLaunched(Message):
    command: str
    run_id: str | None
    argv: tuple[str, ...]
