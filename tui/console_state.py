"""What the console remembers between sessions (the applied strategy version, the last
job launched per form and the form shown, the Runs filter and sort, the Lab's tab, the
critic and adapter it had loaded), in a small JSON file beside the registry. Losing it loses
nothing that matters, so read and write errors are ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def state_path(db_path: str | os.PathLike | None) -> Path | None:
    return None if db_path is None else Path(db_path).with_suffix(".console.json")


def load(db_path: str | os.PathLike | None) -> dict[str, Any]:
    path = state_path(db_path)
    try:
        data = json.loads(path.read_text()) if path is not None and path.is_file() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(db_path: str | os.PathLike | None, **changes: Any) -> None:
    path = state_path(db_path)
    if path is None:
        return
    try:
        data = {**load(db_path), **changes}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)
    except OSError:
        pass


def models_to_reopen(db_path: str | os.PathLike | None, actor: str | None, adapter: str | None,
                     critic: str | None, gone: Callable[[str], str | None] = lambda spec: None,
                     notes: list[str] | None = None) -> tuple[str | None, str | None]:
    """(adapter, critic) for a new session: what the command line says ('none': none, not
    the last session's), else what the last session on this registry had loaded (its
    adapter only for the same actor). A remembered one that is `gone` (its run deleted
    since: `gone` says why) is dropped and forgotten, with a line in `notes`: the console
    opens with what is left instead of failing to load it."""
    saved = load(db_path)
    chosen = {"critic": critic, "adapter": adapter}
    for role in chosen:
        remembered = saved.get(role)
        if chosen[role] is not None or not isinstance(remembered, str):
            continue
        if role == "adapter" and saved.get("actor") != actor:
            continue
        why = gone(remembered)
        if why is None:
            chosen[role] = remembered
            continue
        save(db_path, **{role: None})
        if notes is not None:
            notes.append(f"the last session's {role} {remembered} is gone ({why}); opened without it")
    adapter, critic = chosen["adapter"], chosen["critic"]
    return (None if said_none(adapter) else adapter), (None if said_none(critic) else critic)


def said_none(value: str | None) -> bool:
    """Whether a --adapter / --critic value asks for none this session."""
    return isinstance(value, str) and value.strip().lower() == "none"
