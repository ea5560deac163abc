"""The package's shape, checked from the source: tui -> cli -> jobs -> library -> envs/models.

Every import statement of lactchain/ and tui/ counts (module level, function-local,
under `if TYPE_CHECKING`, `import a.b` and relative forms alike), plus
`importlib.import_module("literal")`. The tests fail on:
- an import cycle (a strongly connected set of modules, listed);
- an import from a higher layer (LAYERS below; one line per offending import);
- the library importing textual or the console;
- a function in lactchain/ with more than MAX_PARAMS parameters (a config dataclass instead);
- a module that does not import (optional dependencies vllm / ray excepted).

Self-contained on purpose: it parses the tree next to it, nothing outside the repository.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lactchain", "tui")
MAX_PARAMS = 12
# No exemption: the CLI's job commands are generated from their configs, and the
# hand-written ones (inspection, benchmarks without a run) stay within the limit.
PARAMS_EXEMPT: tuple[str, ...] = ()
OPTIONAL = ("vllm", "ray")  # extras: a module may need them and still be fine where they are absent

# ---- the layers, lowest first: a module may import its own layer or a lower one ---------------
#
#   layer  name     modules
#   -----  -------  ---------------------------------------------------------------------------
#   0      base     lactchain.config, lactchain.paths, lactchain.runs.registry (+ .schema, .sqlite_lib), lactchain.moves,
#                   lactchain.runs.lifecycle, lactchain.runs.files, lactchain.runs.checkpoints,
#                   lactchain.prompts, lactchain.machine, lactchain.safe_text   (pure utilities: envs
#                   and models import moves / prompts / paths / run files, so they sit below them)
#   1      envs     lactchain (the package itself: its __init__ registers the envs),
#                   lactchain.envs.*, lactchain.models.*
#   2      library  every other lactchain module (rollout, labelers, train.*, dt.*, pipeline, ...)
#   3      jobs     lactchain.jobs.*
#   4      cli      lactchain.cli.*
#   5      tui      tui.*
BASE = ("lactchain.config", "lactchain.paths", "lactchain.runs.registry", "lactchain.runs.schema",
        "lactchain.runs.sqlite_lib", "lactchain.moves",
        "lactchain.runs.lifecycle", "lactchain.runs.files", "lactchain.runs.checkpoints", "lactchain.prompts",
        "lactchain.machine", "lactchain.safe_text")
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (  # (layer name, module prefixes); "*" = the rest of lactchain
    ("base", BASE),
    ("envs/models", ("lactchain.envs", "lactchain.models")),
    ("library", ("*",)),
    ("jobs", ("lactchain.jobs",)),
    ("cli", ("lactchain.cli",)),
    ("tui", ("tui",)),
)
ROOT_PACKAGE_LAYER = 1  # `lactchain` itself


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """The layer of a module: the one naming its longest prefix ("*": the rest of lactchain)."""
    if module == "lactchain":
        return ROOT_PACKAGE_LAYER
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix != "*" and _under(module, prefix) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best is not None:
        return best
    assert _under(module, "lactchain"), module
    return next(i for i, (_, prefixes) in enumerate(LAYERS) if "*" in prefixes)


def layer_name(module: str) -> str:
    return LAYERS[layer_of(module)][0]


# ---- parsing ----------------------------------------------------------------------------------

def find_modules(root: Path) -> dict[str, Path]:
    """Every module of the packages under `root`: dotted name -> file (a package is its __init__.py)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _absolute(mods: dict[str, Path], module: str, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if mods[module].name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def imported_names(mods: dict[str, Path], module: str) -> list[tuple[int, str]]:
    """(line, dotted name) of everything `module` imports, anywhere in it."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(_parse(mods[module])):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            base = _absolute(mods, module, node)
            for alias in node.names:
                # `from pkg import sub` imports the submodule pkg.sub where there is one, else names of pkg
                candidate = f"{base}.{alias.name}"
                out.append((node.lineno, candidate if candidate in mods else base))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


@lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def import_graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {module of ours it imports: first line}. An import of one of the module's
    own parent packages is left out (importing a submodule runs its parents first anyway)."""
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for module in mods:
        for line, name in imported_names(mods, module):
            while name and name not in mods:  # the longest prefix that is one of ours
                name = name.rpartition(".")[0]
            if not name or name == module or module.startswith(name + "."):
                continue
            graph[module].setdefault(name, line)
    return graph


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    return find_modules(ROOT)


@lru_cache(maxsize=1)
def edges() -> dict[str, dict[str, int]]:
    return import_graph(modules())


def tree(module: str) -> ast.Module:
    return _parse(modules()[module])


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


# ---- the checker checks itself on toy graphs ----------------------------------------------------

def test_cycle_finder_on_a_toy_graph():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {"f": 1}, "f": {"e": 1}, "g": {}}
    assert strongly_connected(graph) == [["a", "b", "c"], ["e", "f"]]
    assert strongly_connected({"a": {"b": 1}, "b": {}}) == []


def test_layer_map():
    assert layer_name("lactchain.moves") == layer_name("lactchain.runs.registry") == "base"
    assert layer_name("lactchain.envs.gridworld") == layer_name("lactchain.models.actor") == "envs/models"
    assert layer_name("lactchain.labelers") == layer_name("lactchain.train.actor") == "library"
    assert layer_name("lactchain.jobs") == layer_name("lactchain.jobs.spec") == "jobs"
    assert layer_name("lactchain.cli.play_cmd") == "cli" and layer_name("tui.screens.archive") == "tui"
    for module in BASE:  # the table names modules that exist (a rename must update it)
        assert module in modules(), f"{module} is in the base layer but does not exist"


def test_imports_are_resolved(tmp_path):
    """Module-level, function-local, relative, `import a.b` and importlib forms all land on
    the right module; a parent package is not an edge, a submodule is."""
    files = {
        "lactchain/__init__.py": "from lactchain import envs\n",
        "lactchain/envs/__init__.py": "from .grid import State\n",
        "lactchain/envs/grid.py": "from __future__ import annotations\nfrom lactchain.envs import helpers\n",
        "lactchain/envs/helpers.py": "def f():\n    import lactchain.models.actor\n",
        "lactchain/models/__init__.py": "",
        "lactchain/models/actor.py": "from ..envs import State\nfrom . import presets\n",
        "lactchain/models/presets.py": "import importlib\nimportlib.import_module('lactchain.labelers')\n",
        "lactchain/labelers.py": "if False:\n    from lactchain.models.actor import X as Y\nimport torch\n",
        "tui/__init__.py": "",
        "tui/app.py": "class A:\n    def m(self):\n        from lactchain.envs.grid import State\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = {m: sorted(t) for m, t in import_graph(find_modules(tmp_path)).items()}
    assert graph == {
        "lactchain": ["lactchain.envs"],
        "lactchain.envs": ["lactchain.envs.grid"],
        "lactchain.envs.grid": ["lactchain.envs.helpers"],
        "lactchain.envs.helpers": ["lactchain.models.actor"],
        "lactchain.models": [],
        "lactchain.models.actor": ["lactchain.envs", "lactchain.models.presets"],
        "lactchain.models.presets": ["lactchain.labelers"],
        "lactchain.labelers": ["lactchain.models.actor"],
        "tui": [],
        "tui.app": ["lactchain.envs.grid"],
    }
    assert strongly_connected(import_graph(find_modules(tmp_path))) == [
        ["lactchain.envs", "lactchain.envs.grid", "lactchain.envs.helpers", "lactchain.labelers",
         "lactchain.models.actor", "lactchain.models.presets"]]


# ---- the rules ---------------------------------------------------------------------------------

def test_no_import_cycles():
    cycles = strongly_connected(edges())
    graph = edges()
    lines = []
    for component in cycles:
        members = set(component)
        inner = [f"{a}:{graph[a][b]} -> {b}" for a in component for b in sorted(graph[a]) if b in members]
        lines.append(f"import cycle: {' <-> '.join(component)}  ({'; '.join(inner)})")
    assert not cycles, "\n".join([f"{len(cycles)} import cycle(s):", *lines])


def test_no_import_from_a_higher_layer():
    bad = []
    for module, targets in sorted(edges().items()):
        for target, line in sorted(targets.items()):
            if layer_of(target) > layer_of(module):
                rel = modules()[module].relative_to(ROOT)
                bad.append(f"{rel}:{line}: {module} ({layer_name(module)}) imports {target} ({layer_name(target)})")
    assert not bad, "\n".join([f"{len(bad)} import(s) from a higher layer:", *bad])


def test_library_source_never_imports_textual_or_tui():
    bad = []
    for module in modules():
        if not _under(module, "lactchain"):
            continue
        for line, name in imported_names(modules(), module):
            if name.split(".")[0] in ("textual", "tui"):
                bad.append(f"{modules()[module].relative_to(ROOT)}:{line}: {module} imports {name}")
    assert not bad, "\n".join(["the library imports the console:", *bad])


def _param_count(node: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> int:
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    n = len(positional) + len(a.kwonlyargs)  # *args / **kwargs not counted
    if in_class and positional and positional[0].arg in ("self", "cls"):
        n -= 1
    return n


def _functions(node: ast.AST, prefix: str, in_class: bool = False):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}.{child.name}", child, in_class
            yield from _functions(child, f"{prefix}.{child.name}")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}.{child.name}", in_class=True)
        else:
            yield from _functions(child, prefix, in_class)


def test_no_library_function_has_more_than_max_params():
    bad = []
    for module in sorted(modules()):
        if not _under(module, "lactchain") or any(_under(module, p) for p in PARAMS_EXEMPT):
            continue
        for name, node, in_class in _functions(tree(module), module):
            n = _param_count(node, in_class)
            if n > MAX_PARAMS:
                bad.append((n, f"{modules()[module].relative_to(ROOT)}:{node.lineno}: {name} has {n} parameters"))
    bad.sort(key=lambda item: (-item[0], item[1]))
    assert not bad, "\n".join([f"{len(bad)} function(s) over {MAX_PARAMS} parameters (use a config dataclass):",
                               *(line for _, line in bad)])


# ---- every module imports -------------------------------------------------------------------------

IMPORT_ALL = r"""
import importlib, json, sys, traceback
optional = tuple(sys.argv[2].split(","))
failed, skipped = {}, {}
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except ImportError as exc:  # skipped only when what is missing is an optional extra
        missing = (exc.name or "").split(".")[0]
        if missing in optional or any(f"No module named '{o}" in str(exc) for o in optional):
            skipped[name] = str(exc)
        else:
            failed[name] = traceback.format_exc(limit=-3)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "tui"))
print(json.dumps({"failed": failed, "skipped": skipped, "console": loaded}))
"""


def _import_all(names: list[str]) -> dict:
    """Import `names` in a fresh interpreter: {"failed": {name: traceback}, "skipped": {...},
    "console": [textual / tui modules loaded]}."""
    res = subprocess.run([sys.executable, "-c", IMPORT_ALL, ",".join(names), ",".join(OPTIONAL)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _importable(prefix: str) -> list[str]:
    return sorted(m for m in modules() if m.split(".")[0] == prefix and not m.endswith("__main__"))


def test_every_library_module_imports_without_the_console():
    """In a fresh interpreter: every lactchain module imports, and none pulls in textual or tui."""
    names = _importable("lactchain")
    assert len(names) > 20
    out = _import_all(names)
    lines = [f"{name}: {tb.strip().splitlines()[-1]}" for name, tb in sorted(out["failed"].items())]
    assert not out["failed"], "\n".join(["modules that do not import:", *lines, "", *out["failed"].values()])
    assert out["console"] == [], f"the library pulled in {', '.join(out['console'])}"


def test_every_console_module_imports():
    pytest.importorskip("textual")
    out = _import_all(_importable("tui"))
    lines = [f"{name}: {tb.strip().splitlines()[-1]}" for name, tb in sorted(out["failed"].items())]
    assert not out["failed"], "\n".join(["modules that do not import:", *lines, "", *out["failed"].values()])


# ---- names that cross a module line, and the loop's length -------------------------------------

def test_no_module_imports_a_private_name_from_another():
    """What crosses a module line has a public name: `from lactchain.x import _y` couples a
    module to another's internals (rename it, or keep it where it is used)."""
    bad = []
    for module in sorted(modules()):
        for node in ast.walk(tree(module)):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    bad.append(f"{modules()[module].relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}")
    assert not bad, "\n".join(bad)


LOOP_MAX_LINES = 80


@lru_cache(maxsize=None)
def loaded_at_import(module: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
    """Our modules that importing `module` loads: its parents and, through them and its
    module-level imports, theirs (a static reading of the source)."""
    mods, out = modules(), set()
    parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
    for node in tree(module).body:
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                out |= _ours(mods, module, sub)
    for name in [*parents, *sorted(out)]:
        if name in mods and name not in seen and name != module:
            out |= {name} | loaded_at_import(name, seen | {module})
    return frozenset(out)


def _ours(mods: dict[str, Path], module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules of ours an import statement names (a `from pkg import sub` names pkg.sub)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _absolute(mods, module, node)
        subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in mods]
        names = subs + ([base] if len(subs) < len(node.names) else [])  # the package only for its own names
    return {name for name in names if name in mods}


def test_no_function_imports_what_its_module_already_loads():
    """A function-local import defers a module: the CLI's commands, the console's screens and the
    model libraries load when used, which keeps start-up light. One of a module that the file's
    own module-level imports load anyway defers nothing and only hides a dependency from the
    reader: it belongs at the top."""
    mods, found = modules(), []
    for module in mods:
        loaded = None
        for func in ast.walk(tree(module)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    loaded = loaded_at_import(module) if loaded is None else loaded
                    found += [f"{mods[module].relative_to(ROOT)}:{node.lineno} {name}"
                              for name in sorted(_ours(mods, module, node) & loaded)]
    assert not found, "imported inside a function, though already loaded at import: " + ", ".join(found)


def test_the_loop_reads_as_one_algorithm_under_80_lines():
    """The learning loop is one function a newcomer reads top to bottom (its phases are
    module-level functions over a LoopState): it may not grow past LOOP_MAX_LINES."""
    loops = [node for node in ast.walk(tree("lactchain.loop.pipeline"))
             if isinstance(node, ast.FunctionDef) and node.name == "_loop"]
    assert len(loops) == 1
    node = loops[0]
    length = node.end_lineno - node.lineno + 1
    assert length <= LOOP_MAX_LINES, f"lactchain/loop/pipeline.py: _loop is {length} lines (at most {LOOP_MAX_LINES})"


TOP_LEVEL_MAX = 10


def test_the_top_of_the_library_holds_at_most_ten_modules():
    """The folder tree says what the system is: storage (runs/), the loop (loop/), Motif,
    the archive, strategy search and benchmarks live in packages; only the shared
    utilities stay at the top of lactchain/."""
    top = sorted(p.name for p in (ROOT / "lactchain").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= TOP_LEVEL_MAX, top
    for package in ("runs", "loop", "motif", "archive", "strategy", "bench", "jobs", "envs", "models", "train"):
        assert (ROOT / "lactchain" / package / "__init__.py").is_file(), package
