"""How close each phase of the loop comes to this machine's limit (`lactchain bench
device`, alias `bench gpu`): per phase seconds, tokens/s and model-FLOPs utilisation,
on a CUDA GPU or the CPU, with the checks that the fast paths give the same answers.

Phases, on the default models unless told otherwise:
- `evaluate`: greedy answers for every start state of the 4x4 grid, one batch (the
  loop's evaluation), then the same with xgrammar's processor instead of the device
  tables (`grammar_identical`), with the prefix cache flipped (`prefix_cache_identical`)
  and with a static KV cache, which on CUDA transformers compiles into CUDA graphs
  (`static_cache_identical`); each variant warmed up (that first run's time reported as
  `<variant>_cold_seconds`: compiling is paid there), timed twice interleaved, best kept.
- `rollout`: seeded sampled rollouts, `envs` envs in lock-step, with and without the
  prefix cache (its speedup on this device: the loop's `prefix_cache` default follows
  it); each warmed up at full size, timed twice interleaved, best kept.
- `critic_encode`: the critic's Q values for `critic_texts` (state, move list) texts.
- `train_step`: CPO-SimPO steps on 8 pairs (optimal vs one-move-off plans): seconds
  per step, the first step (one-off costs) excluded; on a CPU in both precisions; on
  every device both with the rows' shared prompt prefix run once and with every row run
  whole (`shared_prefix_speedup`; the device's default is `shared_prefix`), and rft's
  steps on the same rows both ways (`rft_shared_prefix_speedup`).
- `grpo_step`: GRPO steps as the loop takes them (groups of 4 samples from start
  states, rewarded with the env's return): sampling, scoring and the update.

Utilisation = model FLOPs / seconds / peak. Model FLOPs: 2 x parameters per token
processed for inference, 6 x for training (PaLM's convention; attention ignored,
tied embeddings counted once). Peak: the card's dense bf16 figure where the name is
known (`SPEC_PEAK_TFLOPS`), and always the machine's measured matmul throughput in
the phase's dtype (`matmul_tflops`), so a CPU gets a figure too.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from lactchain.bench.common import Recording, agreement, grid_starts
from lactchain.bench.device_config import PHASES, DeviceBenchConfig
from lactchain.envs import GridWorldEnv, Planner
from lactchain.moves import DEFAULT_MOVES, format_moves

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendors' data sheets; first match wins.
SPEC_PEAK_TFLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H200",), 989.4),
    (("H100", "PCIE"), 756.0),
    (("H100", "NVL"), 835.0),
    (("H100",), 989.4),
    (("A100",), 312.0),
    (("L40S",), 362.0),
    (("L4",), 121.0),
    (("A10G",), 125.0),
    (("4090",), 165.2),
)


def device_name(device: torch.device) -> str:
    from lactchain.machine import machine_info

    return torch.cuda.get_device_name(device) if device.type == "cuda" else machine_info()["cpu"]


def spec_peak_tflops(name: str) -> float | None:
    upper = name.upper()
    for keys, peak in SPEC_PEAK_TFLOPS:
        if all(k in upper for k in keys):
            return peak
    return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int | None = None, repeats: int = 5) -> float:
    """Measured dense matmul throughput: the best a phase in this dtype could hope for."""
    n = size or (8192 if device.type == "cuda" else 2048)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e12


@contextlib.contextmanager
def profiled(folder: str | None, phase: str, device: torch.device) -> Iterator[None]:
    """torch.profiler over one phase (CPU, plus CUDA on a GPU): a Chrome trace
    `<folder>/<phase>.trace.json` and the top ops by self time in `<phase>.txt`."""
    if not folder:
        yield
        return
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    with profile(activities=activities, record_shapes=False) as prof:
        yield
    prof.export_chrome_trace(str(out / f"{phase}.trace.json"))
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    (out / f"{phase}.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=30) + "\n")


def parameters_of(model: Any) -> int:
    """Distinct parameters (tied weights once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


class Counting(Recording):
    """A `Recording` that also counts the prompt tokens the model was fed (a shared
    prefix once when the prefix cache computed it, not at all when it was cached), the
    generated tokens and the strict parses."""

    def __init__(self, actor: Any) -> None:
        super().__init__(actor)
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.strict = 0
        self._ids: dict[str, list[int]] = {}  # prompt text -> ids (a rollout repeats its prompts)

    def generate(self, prompts: list[str], **kwargs: Any) -> Any:
        from lactchain.models.actor import MIN_SHARED_PREFIX, common_prefix_len

        before = self.actor.prefix_computations
        out = super().generate(prompts, **kwargs)
        for p in prompts:
            if p not in self._ids:
                self._ids[p] = self.actor.prompt_ids(p)
        rows = [self._ids[p] for p in prompts] * max(1, len(out) // max(1, len(prompts)))
        shared = common_prefix_len(rows) if self.actor.prefix_cache and len(rows) > 1 else 0
        if shared >= MIN_SHARED_PREFIX:
            computed = shared if self.actor.prefix_computations > before else 0
            self.prompt_tokens += computed + sum(len(r) - shared for r in rows)
        else:
            self.prompt_tokens += sum(len(r) for r in rows)
        self.generated_tokens += sum(s.n_tokens for s in out)
        self.strict += sum(s.mode == "strict" for s in out)
        return out


def model_flops(model: Any, tokens: int, logit_rows: int, training: bool = False) -> float:
    """Model FLOPs of `tokens` through `model`, `logit_rows` of them through its LM head:
    2 per weight per token forward, 6 with the backward (PaLM's count); the input
    embedding is a lookup (no FLOPs), the head a matmul only where logits are taken
    (generate takes them for the last position only)."""
    per_weight = 6.0 if training else 2.0
    embedding = model.get_input_embeddings().weight
    head_layer = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head = head_layer.weight if head_layer is not None else None
    body = parameters_of(model) - embedding.numel()
    if head is not None and head is not embedding:  # an untied head is a weight of its own
        body -= head.numel()
    head_size = head.numel() if head is not None else 0
    return per_weight * (body * tokens + head_size * logit_rows)


def _rate(flops: float, seconds: float, peak: float | None) -> float | None:
    return None if not peak or seconds <= 0 else flops / seconds / (peak * 1e12)


class _Phases:
    """Times phases and fills the report's per-phase rows."""

    def __init__(self, cfg: DeviceBenchConfig, device: torch.device, spec_peak: float | None,
                 check: Callable[[], None] | None = None) -> None:
        self.cfg, self.device, self.spec_peak = cfg, device, spec_peak
        self.check = check or (lambda: None)  # raises to stop the bench (a job's cancellation)
        self.rows: dict[str, dict[str, Any]] = {}
        self._matmul: dict[torch.dtype, float] = {}

    def matmul(self, dtype: torch.dtype) -> float:
        if dtype not in self._matmul:
            self._matmul[dtype] = matmul_tflops(self.device, dtype)
        return self._matmul[dtype]

    def should_stop(self) -> bool:
        """For the rollout engine's `should_stop`: raises instead of answering True."""
        self.check()
        return False

    def on_log(self, *_: Any) -> None:
        """For the trainers' `on_log` (every logged step)."""
        self.check()

    @contextlib.contextmanager
    def timed(self, phase: str, profile: str | None = None) -> Iterator[dict[str, Any]]:
        """Times the block into `rows[phase]`; `profile`: the name its trace is saved under."""
        row: dict[str, Any] = {}
        _sync(self.device)
        with profiled(self.cfg.profile if profile else None, profile or phase, self.device):
            t0 = time.perf_counter()
            yield row
            _sync(self.device)
            row["seconds"] = time.perf_counter() - t0
        self.rows[phase] = row

    def utilisation(self, row: dict[str, Any], flops: float, dtype: torch.dtype) -> None:
        row["model_tflops"] = flops / row["seconds"] / 1e12 if row["seconds"] > 0 else None
        row["utilisation_vs_spec"] = _rate(flops, row["seconds"], self.spec_peak)
        row["utilisation_vs_matmul"] = _rate(flops, row["seconds"], self.matmul(dtype))


def _greedy_evaluation(actor: Any, phases: _Phases) -> tuple[dict[str, Any], Counting]:
    """The loop's evaluation (every start state, greedy, at most 5 actions, `envs` at once)."""
    from lactchain.loop.evaluate import evaluate_actor

    counting = Counting(actor)
    return evaluate_actor(counting, states="all", n_envs=phases.cfg.envs, max_actions=5, seed=phases.cfg.seed,
                          should_stop=phases.should_stop), counting


# Variants a device may not run yet (their failure is reported as `<variant>_error`).
EXPERIMENTAL_VARIANTS = ("static_cudagraphs",)


def _use(actor: Any, settings: tuple[str, bool, bool, bool, str]) -> None:
    """Set an evaluation variant: grammar engine, prefix cache, static cache, cuDNN SDPA, how
    the static cache's decode step is compiled."""
    from lactchain.models.attention import choose_sdpa_kernels

    actor.grammar_engine, actor.prefix_cache, actor.static_cache = settings[:3]
    choose_sdpa_kernels(actor.device, settings[3])
    actor.decode_compiler = settings[4]


def _evaluate(phases: _Phases, actor: Any, dtype: torch.dtype) -> None:
    """The evaluation timed with the device tables, with xgrammar's processor, with the
    prefix cache flipped, with a static cache and, on CUDA, with cuDNN's SDPA kernels
    flipped: after one warm-up each (its time: `<variant>_cold_seconds`), `eval_rounds`
    times each (2 by default), interleaved, best kept (so no variant pays another's cold start)."""
    cfg = phases.cfg
    own = (actor.grammar_engine, actor.prefix_cache, actor.static_cache, torch.backends.cuda.cudnn_sdp_enabled(),
           actor.decode_compiler)
    variants = {"evaluate": own, "xgrammar": ("xgrammar", *own[1:]),
                "other_cache": (own[0], not own[1], *own[2:]),
                "static_cache": (own[0], False, not own[2], *own[3:])}  # a static cache goes without the prefix cache
    if actor.device.type == "cuda":  # its graph built per new shape (lactchain.models.attention)
        variants["cudnn_sdpa"] = (*own[:3], not own[3], own[4])
        # the static cache's decode step captured by torch's cudagraphs backend rather than compiled by inductor
        variants["static_cudagraphs"] = (own[0], False, True, own[3], "cudagraphs")
    best: dict[str, float] = {}
    cold: dict[str, float] = {}  # the warm-up's own time: what a variant costs the first time (compiling included)
    runs: dict[str, tuple[dict[str, Any], Counting]] = {}
    failed: dict[str, str] = {}  # an experimental variant that fails is reported, not fatal to the bench
    try:
        for name, settings in list(variants.items()):  # warm-up: grammar tables, prefix KV, compiled graphs
            _use(actor, settings)
            try:
                with phases.timed(f"evaluate_{name}_cold") as row:
                    _greedy_evaluation(actor, phases)
            except Exception as exc:  # noqa: BLE001 - only the experimental variants
                if name not in EXPERIMENTAL_VARIANTS:
                    raise
                failed[name] = f"{type(exc).__name__}: {exc}"[:300]
                del variants[name]
                continue
            cold[name] = row["seconds"]
        for round_ in range(cfg.eval_rounds):
            for name, settings in variants.items():
                _use(actor, settings)
                profile = "evaluate" if name == "evaluate" and round_ == cfg.eval_rounds - 1 else None
                with phases.timed(f"evaluate_{name}_{round_}", profile=profile) as row:
                    runs[name] = _greedy_evaluation(actor, phases)
                best[name] = min(best.get(name, float("inf")), row["seconds"])
    finally:
        _use(actor, own)
    result, counting = runs["evaluate"]
    seconds = best["evaluate"]
    tokens = counting.prompt_tokens + counting.generated_tokens
    row = {"seconds": seconds, "rounds": cfg.eval_rounds, "states": result["states"], "env_steps": result["env_steps"],
           "success_rate": result.get("success_rate"), "generated_tokens": counting.generated_tokens,
           "prompt_tokens": counting.prompt_tokens, "tokens_per_s": tokens / seconds,
           "env_steps_per_s": result["env_steps"] / seconds, "strict": counting.strict,
           "grammar_engine": own[0], "prefix_cache": own[1], "static_cache": own[2], "cudnn_sdpa": own[3]}
    for name, key in (("xgrammar", "grammar"), ("other_cache", "prefix_cache"), ("static_cache", "static_cache"),
                      ("cudnn_sdpa", "cudnn_sdpa"), ("static_cudagraphs", "static_cudagraphs")):  # same answers? best time
        if name in runs:
            row[f"{key}_identical"] = runs[name][1].token_ids == counting.token_ids
            row[f"{name}_seconds"] = best[name]
    row.update({f"{name}_cold_seconds": cold[name] for name in variants})
    row.update({f"{name}_error": why for name, why in failed.items()})
    phases.utilisation(row, model_flops(actor.model, tokens, counting.generated_tokens), dtype)
    phases.rows["evaluate"] = row


def _rollout(phases: _Phases, actor: Any, dtype: torch.dtype) -> None:
    """Seeded sampled rollouts with the prefix cache as configured and flipped: each
    warmed up once at full size, then `eval_rounds` timed runs of each, interleaved, best
    kept (a variant timed first would otherwise pay the full batch's cold start alone)."""
    from lactchain.loop.rollout import RolloutConfig, run_rollouts

    cfg = phases.cfg
    settings = RolloutConfig(episodes=cfg.envs * cfg.steps, n_envs=cfg.envs, temperature=1.0, start="random",
                             seed=cfg.seed, max_env_steps=cfg.envs * cfg.steps)
    before = actor.prefix_cache
    variants = (before, not before)
    best: dict[bool, float] = {}
    results: dict[bool, tuple[Any, Counting]] = {}
    try:
        for cache in variants:
            actor.prefix_cache = cache
            run_rollouts(actor, settings, should_stop=phases.should_stop)
        for round_ in range(cfg.eval_rounds):
            for cache in variants:
                actor.prefix_cache = cache
                counting = Counting(actor)
                last = round_ == cfg.eval_rounds - 1
                with phases.timed(f"rollout_{cache}_{round_}", profile="rollout" if cache == before and last else None) as row:
                    summary = run_rollouts(counting, settings, should_stop=phases.should_stop)
                best[cache] = min(best.get(cache, float("inf")), row["seconds"])
                results[cache] = (summary, counting)
    finally:
        actor.prefix_cache = before
    summary, counting = results[before]
    seconds = best[before]
    tokens = counting.prompt_tokens + counting.generated_tokens
    rates = {cache: results[cache][0].as_dict()["env_steps"] / best[cache] for cache in variants}
    row = {"seconds": seconds, "rounds": cfg.eval_rounds, "envs": cfg.envs, "env_steps": summary.as_dict()["env_steps"],
           "env_steps_per_s": rates[before], "tokens_per_s": tokens / seconds, "prefix_cache": before,
           "prefix_cache_speedup": rates[True] / rates[False] if rates[False] else None,
           # Sampled answers: float rounding (bf16 above all) may flip a draw, so a share, not a must.
           "prefix_cache_agreement": agreement(counting.token_ids, results[not before][1].token_ids)}
    phases.utilisation(row, model_flops(actor.model, tokens, counting.generated_tokens), dtype)
    phases.rows["rollout"] = row


def _critic_texts(n: int) -> tuple[list[Any], list[list[str]]]:
    states = grid_starts(DEFAULT_MOVES)[1]
    lists = [[DEFAULT_MOVES[(i >> k) & 1] for k in range(1 + i % 5)] for i in range(n)]
    return [states[i % len(states)] for i in range(n)], lists


def _critic(phases: _Phases, cfg: DeviceBenchConfig) -> None:
    from lactchain.models.critic import Critic

    critic = Critic.load(cfg.critic, device=phases.device)
    states, lists = _critic_texts(cfg.critic_texts)
    texts = critic.q_texts(states, lists)
    tokens = sum(len(critic.tokenizer(t)["input_ids"]) for t in texts)
    critic.q_values(states[:8], lists[:8])  # warm-up
    with phases.timed("critic_encode", profile="critic_encode") as row:
        critic.q_values(states, lists)
    row.update(texts=len(texts), tokens=tokens, tokens_per_s=tokens / row["seconds"])
    dtype = next(critic.backbone.parameters()).dtype
    phases.utilisation(row, model_flops(critic.backbone, tokens, 0), dtype)


def _pairs(actor: Any, n: int = 8) -> list[dict[str, Any]]:
    """Optimal plans (the planner's first 3 moves) against the same plan with its first
    move changed: real preference pairs of realistic length."""
    prompts, states = grid_starts(actor.moves)
    env = GridWorldEnv(moves=actor.moves)
    planner = Planner(env)
    pairs = []
    for prompt, state in list(zip(prompts, states))[:: max(1, len(states) // n)][:n]:
        chosen = planner.plan(state)[:3] or [actor.moves[0]]
        other = [m for m in actor.moves if m != chosen[0]][0]
        pairs.append({"prompt": prompt, "chosen": chosen, "rejected": [other] + chosen[1:],
                      "labeler": "critic", "status": "labeled"})
    return pairs


def _train_once(actor: Any, pairs: list[dict[str, Any]], phases: _Phases, bf16: bool | None,
                shared_prefix: bool | None = None, loss: str = "simpo", compiled: bool | None = None) -> dict[str, Any]:
    from lactchain.train.actor import train_actor
    from lactchain.train.actor_config import TrainActorConfig

    cfg = phases.cfg
    trl = {} if loss == "rft" else dict(save_steps=10_000, save_total_limit=1, bf16=bf16)  # rft: fp32, no checkpoints
    config = TrainActorConfig(loss=loss, max_steps=cfg.train_steps, batch_size=len(pairs), seed=cfg.seed,
                              shared_prefix=shared_prefix, torch_compile=compiled, **trl)
    config.check()
    before = actor.model
    actor.model = copy.deepcopy(before)  # LoRA is injected in place: each run on its own copy
    try:
        with tempfile.TemporaryDirectory(prefix="lactchain-bench-device-") as out:
            return train_actor(actor, pairs, config, output_dir=out, on_log=phases.on_log)
    finally:
        actor.model = before


def _train(phases: _Phases, actor: Any, cfg: DeviceBenchConfig) -> None:
    """CPO-SimPO steps at the trainers' default precision (bf16 autocast where the device
    does bf16 natively); on a CPU also at the other one, so the gain shows."""
    from lactchain.machine import native_bf16
    from lactchain.models.actor import common_prefix_len

    pairs = _pairs(actor)
    bf16 = native_bf16(phases.device.type)
    with phases.timed("train_step", profile="train_step") as row:
        result = _train_once(actor, pairs, phases, None)  # the device's default: shared prefix or whole rows
    step, shared_prefix = result["s_per_step"], result["shared_prefix"]
    # Each pair is two rows (chosen, rejected): prompt + completion + EOS; with the shared
    # prefix the rows' common prompt goes through the model once (lactchain.train.shared_prefix).
    prompts = [actor.prompt_ids(p["prompt"]) for p in pairs]
    shared = common_prefix_len(prompts) if shared_prefix else 0
    tokens = shared + sum(2 * (len(ids) - shared) + actor.count_tokens(format_moves(p["chosen"]))
                          + actor.count_tokens(format_moves(p["rejected"])) + 2 for ids, p in zip(prompts, pairs))
    row.update(steps=result["steps"], pairs=len(pairs), s_per_step=step, median_step_s=result["median_step_s"],
               loss="simpo", bf16=bf16, shared_prefix=shared_prefix, tokens_per_step=tokens, shared_prefix_tokens=shared,
               tokens_per_s=tokens / step if step else None)
    if step:
        timed = {"seconds": step}
        phases.utilisation(timed, model_flops(actor.model, tokens, tokens, training=True),
                           torch.bfloat16 if bf16 else next(actor.model.parameters()).dtype)
        row.update({k: v for k, v in timed.items() if k != "seconds"})
    if phases.device.type == "cpu":
        other = _train_once(actor, pairs, phases, not bf16)["s_per_step"]
        half, full = (step, other) if bf16 else (other, step)
        row.update(bf16_s_per_step=half, fp32_s_per_step=full, bf16_speedup=full / half if full and half else None)
    # The other way of running the rows, timed on every device (SHARED_PREFIX_PAYS follows
    # it): a CPU is bound by FLOPs, a GPU running a small model by kernel launches.
    other = _train_once(actor, pairs, phases, None, shared_prefix=not shared_prefix)["s_per_step"]
    row.update(_both_ways(*((step, other) if shared_prefix else (other, step))))
    # rft (the loop's default loss) has its own loop with the same two passes: both ways too.
    rft = [_train_once(actor, pairs, phases, None, shared_prefix=flag, loss="rft") for flag in (True, False)]
    row.update(_both_ways(*(done["s_per_step"] for done in rft), prefix="rft_"))
    # What a token budget (TrainActorConfig.batch_tokens) would fill: 4x the pairs a step, the device's defaults.
    row.update(_larger_batch(result, _train_once(actor, _pairs(actor, 4 * len(pairs)), phases, None)))
    if cfg.compiled:  # torch.compile (COMPILE_PAYS follows it), each loss against its own uncompiled step
        for loss, plain in (("simpo", result), ("rft", rft[0] if shared_prefix else rft[1])):
            done = _train_once(actor, pairs, phases, None, loss=loss, compiled=True)
            row.update(_compiled_vs_plain(done, plain, prefix="" if loss == "simpo" else "rft_"))


def _compiled_vs_plain(compiled: dict[str, Any], plain: dict[str, Any], prefix: str = "") -> dict[str, float | None]:
    """The compiled step against the plain one, median against median: one slow step (a
    recompile, a cache warming) then moves neither side."""
    fast, slow = compiled["median_step_s"], plain["median_step_s"]
    return {f"{prefix}compiled_s_per_step": fast, f"{prefix}compiled_first_step_s": compiled["first_step_s"],
            f"{prefix}plain_median_s_per_step": slow, f"{prefix}compiled_speedup": slow / fast if fast and slow else None}


def _larger_batch(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float | None]:
    """A step of more pairs against the default one, median against median, and pairs per
    second relative to it: near the pairs' ratio where a step costs the same whatever
    its size (a small model on a GPU), near 1 where its time grows with its tokens (a CPU)."""
    fast, slow = small["median_step_s"], large["median_step_s"]
    gain = (large["batch_size"] / slow) / (small["batch_size"] / fast) if fast and slow else None
    return {"large_batch_pairs": large["batch_size"], "large_batch_s_per_step": slow,
            "large_batch_pairs_per_s_gain": gain}


def _both_ways(shared: float | None, whole: float | None, prefix: str = "") -> dict[str, float | None]:
    """A step's seconds with the shared prefix and with whole rows, and the prefix's speedup."""
    return {f"{prefix}shared_prefix_s_per_step": shared, f"{prefix}whole_rows_s_per_step": whole,
            f"{prefix}shared_prefix_speedup": whole / shared if whole and shared else None}


def _grpo(phases: _Phases, actor: Any, cfg: DeviceBenchConfig) -> None:
    """GRPO steps as the loop takes them: sampled groups from start states (the loop's
    defaults: states per step, 4 generations), rewarded with the env's return of the
    whole list; seconds per step (sampling + scoring + the update), the first left out."""
    from lactchain.envs.replay import execute_from
    from lactchain.train.actor_config import TrainActorConfig
    from lactchain.train.grpo import GRPOTask, train_grpo

    prompts, states = grid_starts(actor.moves)
    env = GridWorldEnv(moves=actor.moves)
    rows = [{"prompt": p, "state": s} for p, s in zip(prompts, states)]

    def reward(starts: Sequence[Any], samples: Sequence[Any]) -> list[float]:
        return [execute_from(env, s, x.moves)[0] for s, x in zip(starts, samples)]

    config = TrainActorConfig(loss="grpo", max_steps=cfg.train_steps, seed=cfg.seed, save_steps=10_000,
                              save_total_limit=1)
    config.check()
    task = GRPOTask(rows, reward, generations=4, seed=cfg.seed)
    before = actor.model
    actor.model = copy.deepcopy(before)
    try:
        with tempfile.TemporaryDirectory(prefix="lactchain-bench-device-") as out:
            with phases.timed("grpo_step", profile="grpo_step") as row:
                result = train_grpo(actor, task, config, output_dir=out, on_log=phases.on_log)
    finally:
        actor.model = before
    last = result["final_metrics"]  # the last step's split: its rollout (of it, generate) and the rest, the update
    row.update(steps=result["steps"], s_per_step=result["s_per_step"], generations=task.generations,
               states_per_step=config.grpo.states_per_step, last_step_s=last.get("step_time_s"),
               last_rollout_s=last.get("rollout_s"), last_sample_s=last.get("sample_s"))


def run_device_bench(cfg: DeviceBenchConfig, before_phase: Callable[[str], None] | None = None,
                     check: Callable[[], None] | None = None) -> dict[str, Any]:
    """The report: device, dtype, peaks and one row per phase of `cfg.phases` (see the
    module doc). `before_phase(name)` runs before each phase; `check()` raises to stop (a
    job's cancellation), called there too, at every training step and every lock-step: on
    a CPU one phase can take many minutes, and a kill must not wait for its end."""
    from lactchain.machine import resolve_dtype
    from lactchain.models.actor import Actor

    phases = cfg.chosen
    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = getattr(torch, resolve_dtype(cfg.dtype))
    name = device_name(device)
    spec = spec_peak_tflops(name) if device.type == "cuda" else None
    bench = _Phases(cfg, device, spec, check)
    actor = Actor.load(cfg.actor, device=str(device), inference_dtype=dtype)
    params = parameters_of(actor.model)
    steps = {"evaluate": lambda: _evaluate(bench, actor, dtype), "rollout": lambda: _rollout(bench, actor, dtype),
             "critic_encode": lambda: _critic(bench, cfg), "train_step": lambda: _train(bench, actor, cfg),
             "grpo_step": lambda: _grpo(bench, actor, cfg)}
    for phase in PHASES:  # always in this order: later phases train the actor
        if phase in phases:
            if before_phase is not None:
                before_phase(phase)
            steps[phase]()
    report = {
        "device": name, "device_type": device.type, "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(), "actor": cfg.actor, "critic": cfg.critic,
        "actor_parameters": params, "spec_peak_tflops": spec,
        "matmul_tflops": {str(k).removeprefix("torch."): v for k, v in bench._matmul.items()},
        "grammar_engine": actor.grammar_engine, "prefix_cache": actor.prefix_cache,
        "attention": actor.model.config._attn_implementation,  # grouped_sdpa: GQA without the KV copy
        "cudnn_sdpa": torch.backends.cuda.cudnn_sdp_enabled(),  # lactchain.models.attention.CUDNN_SDPA_PAYS
        "phases": {k: v for k, v in bench.rows.items() if k in PHASES},
        "torch": torch.__version__,
    }
    if cfg.profile:
        report["profile"] = str(Path(cfg.profile).resolve())
    return report
