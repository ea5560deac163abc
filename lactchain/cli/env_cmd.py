"""`lactchain env ...`: look at the environments (GridWorld, Blackjack, Taxi) and their exact optimum."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.panel import Panel
from rich.table import Table

from lactchain.cli.common import JsonOption, console, fail, finite, print_json
from lactchain.envs import GridWorldEnv, Planner
from lactchain.envs.catalog import ENVS, make_env
from lactchain.envs.gridworld import render_ansi
from lactchain.envs.scenes import get_scene
from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, format_moves

app = typer.Typer(help="Inspect the environments and their exact optimum.", no_args_is_help=True)


@app.command("list")
def list_envs(as_json: JsonOption = False) -> None:
    """The registered environments (lactchain.envs.catalog): short name, gymnasium id,
    move vocabulary, start states, whether an action can end differently (cards), and
    whether an exact solver gives the optimum every actor is measured against."""
    rows = []
    for name, gym_id in ENVS.items():
        env = make_env(name)
        rows.append({"env": name, "gym_id": gym_id, "moves": list(env.moves), "start_states": len(env.start_states()),
                     "max_actions": env.max_actions, "stochastic": bool(env.stochastic),
                     "exact_solver": env.solver() is not None})
    if as_json:
        print_json(rows)
        return
    table = Table(title="environments (--env NAME or its gymnasium id)")
    for column in ("env", "gymnasium id", "moves", "start states", "stochastic", "exact solver"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["env"], r["gym_id"], ", ".join(r["moves"]), str(r["start_states"]),
                      "yes" if r["stochastic"] else "no", "yes" if r["exact_solver"] else "no")
    console.print(table)


@app.command("show")
def show(
    size: Annotated[int | None, typer.Option("--size", "-n", max=64, help="Grid side length, 2 to 64 (default 4, or the scene's).")] = None,
    scene: Annotated[str | None, typer.Option("--scene", help="A bundled scene (empty, flat, rooms, maze) or a scene JSON "
                                              "file: its size, goal, start, walls and landmarks; not with --size.")] = None,
    turn_right: Annotated[bool, typer.Option("--turn-right", help="Allow 'turn right' as a move.")] = False,
    gamma: Annotated[float, typer.Option("--gamma", callback=finite, min=0.0, max=0.999999, help="Per-action discount for V*.")] = 0.99,
    as_json: JsonOption = False,
) -> None:
    """Render the grid and the optimal plan from the start state.

    The goal sits in the north-east corner; the agent starts in the south-west
    corner facing east. Prints the exact optimal move list (BFS) and V*. With
    --scene, the scene's grid, start and goal, its walls (###) and its landmarks
    (letters on the grid, their cells and colours in a table); --json includes the
    scene itself, a starting point for a scene file of your own.
    """
    if scene is not None and size is not None:
        fail("--size and --scene: the scene sets the grid's size; give one of them")
    try:
        chosen = get_scene(scene) if scene is not None else None
    except ValueError as exc:
        fail(str(exc))
    size = chosen.size if chosen is not None else (4 if size is None else size)
    if not 0.0 <= gamma < 1.0:
        fail(f"--gamma must be in [0, 1), got {gamma}")
    if size > 64:
        fail(f"--size {size} is too large to solve exactly here; use at most 64")
    moves = ALL_MOVES if turn_right else DEFAULT_MOVES
    try:
        if chosen is not None:
            env = GridWorldEnv(moves=moves, render_mode="ansi", scene=chosen)
        else:
            env = GridWorldEnv(size=size, goal=(size - 1, size - 1), moves=moves, render_mode="ansi")
    except ValueError as exc:
        fail(str(exc))
    env.reset()
    planner = Planner(env)
    plan = planner.plan(env.state)
    v_start = planner.value(env.state, gamma)
    if as_json:
        print_json(
            {
                "size": env.size,
                "start": env.start.as_dict(),
                "goal": {"x": env.goal[0], "y": env.goal[1]},
                "moves": list(env.moves),
                "optimal_moves": plan,
                "optimal_move_count": len(plan),
                "v_star_start": v_start,
                "gamma": gamma,
                "max_moves_per_action": env.max_moves_per_action,
                "grid": env.render(),
                "description": env.describe(),
                **({"scene": env.scene.as_dict()} if chosen is not None else {}),
            }
        )
        return
    # Draw the grid with the optimal path marked.
    path = [env.state]
    for move in plan:
        env.step([move])
        path.append(env.state)
    title = f"GridWorld {size}x{size}" + (f" · scene {env.scene.name}" if chosen is not None else "")
    console.print(Panel(render_ansi(env.size, env.start, env.goal, path, env.scene.landmarks, env.walls), title=title,
                        expand=False))
    table = Table(show_header=False, box=None)
    table.add_row("start", str(env.start))
    table.add_row("goal", f"(x={env.goal[0]}, y={env.goal[1]})")
    table.add_row("moves", ", ".join(env.moves))
    if env.walls:
        table.add_row("walls", f"{len(env.walls)} cells (###); {len(env.start_states())} start states")
    table.add_row("optimal plan", f"{format_moves(plan)} ({len(plan)} moves)")
    table.add_row(f"V*(start), gamma={gamma}", f"{v_start:.2f}")
    console.print(table)
    if env.scene.landmarks:
        marks = Table(title=f"landmarks of {env.scene.name} (walkable)")
        for column in ("letter", "name", "colour", "cells"):
            marks.add_column(column)
        for m in env.scene.landmarks:
            marks.add_row(f"[bold black on {m.colour}] {m.letter} [/]", m.name, m.colour,
                          " ".join(f"({x},{y})" for x, y in m.cells))
        console.print(marks)


@app.command("blackjack")
def blackjack(as_json: JsonOption = False) -> None:
    """The exact optimum of LactChain/Blackjack-v0 (dynamic programming, infinite deck):
    the best move for every hand (H hit, S stick) against each dealer up card, V* of each
    hand, and the optimal policy's win rate and expected return per hand."""
    from lactchain.envs.blackjack import BlackjackSolver, Hand

    solver = BlackjackSolver()
    rows = [(s, False) for s in range(4, 22)] + [(s, True) for s in range(12, 22)]
    policy = {f"{'soft' if ace else 'hard'} {s}": {d: solver.action(Hand(s, d, ace)) for d in range(1, 11)}
              for s, ace in rows}
    if as_json:
        print_json({
            "policy": policy,
            "v_star": {f"{'soft' if ace else 'hard'} {s}": {d: solver.value(Hand(s, d, ace)) for d in range(1, 11)}
                       for s, ace in rows},
            "win_rate": solver.win_rate(), "expected_return": solver.expected_return(),
        })
        return
    table = Table(title="Blackjack: the exact optimal move (H hit, S stick) by dealer up card")
    table.add_column("hand")
    for d in range(1, 11):
        table.add_column("A" if d == 1 else str(d), justify="center")
    for name, moves in policy.items():
        table.add_row(name, *[("[bold red]H[/]" if m == "hit" else "[green]S[/]") for m in moves.values()])
    console.print(table)
    console.print(f"optimal policy: win rate {solver.win_rate():.4f}, expected return {solver.expected_return():+.4f} "
                  "per hand (Sutton & Barto rules: a natural wins unless the dealer has one)")
