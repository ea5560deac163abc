"""Benchmark figures: one way to open a headless matplotlib figure and to write it out."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def new_figure(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """`plt.subplots(...)` on the Agg backend (no display: benchmarks run over SSH and in CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write (creating the folder) and close `fig`; returns `path`."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
