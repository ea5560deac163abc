"""The TRL trainers' forward runs a batch's shared prompt prefix once (lactchain.train.shared_prefix):
the same hidden states, log-probs and LoRA gradients as the plain forward, fewer positions through
the model, and generation-style calls left alone."""

from __future__ import annotations

import pytest
import torch

from lactchain.train.shared_prefix import MIN_SHARED_TOKENS, share_prompt_prefix, shared_prefix_len

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_lora():
    """The tiny actor's model with a fresh LoRA adapter (dropout 0, as the trainers default)."""
    from peft import LoraConfig, get_peft_model

    from lactchain.models.actor import Actor

    actor = Actor.load("tiny")
    torch.manual_seed(0)
    model = get_peft_model(actor.model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
    for name, p in model.named_parameters():  # a non-zero B, so the adapter changes the prefix's keys/values
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    return actor, model


def right_padded(prefix: list[int], tails: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = len(prefix) + max(len(t) for t in tails)
    ids = torch.full((len(tails), width), pad)
    mask = torch.zeros_like(ids)
    for i, tail in enumerate(tails):
        row = prefix + tail
        ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
    return ids, mask


class Positions:
    """Counts the token positions the decoder's embedding is handed (a real forward hook)."""

    def __init__(self, model) -> None:  # noqa: ANN001
        self.seen: list[int] = []
        model.get_input_embeddings().register_forward_hook(lambda _m, args, _out: self.seen.append(args[0].numel()))


def loss_logits_grads(model, ids, mask, labels):  # noqa: ANN001, ANN201
    """One training forward and backward: the loss, the logits and every LoRA gradient."""
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), out.logits.detach(), grads


def test_the_shared_prefix_is_the_leading_run_of_equal_unpadded_tokens_and_leaves_one_position():
    ids = torch.tensor([[5, 6, 7, 8, 1], [5, 6, 7, 9, 0]])
    assert shared_prefix_len(ids, torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])) == 3
    assert shared_prefix_len(ids, torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]])) == 0  # left padding
    same = torch.tensor([[5, 6, 7], [5, 6, 7]])
    assert shared_prefix_len(same, torch.ones_like(same)) == 2  # the last position stays per row


def test_a_training_forward_runs_the_prefix_once_with_the_same_log_probs_and_lora_gradients():
    """Right-padded rows that share a 40-token prompt and differ after it (as a DPO batch of
    chosen and rejected answers): the patched backbone sees 40 + 4 x tail positions, not 4 x all,
    and the loss and every LoRA gradient match the plain forward."""
    actor, model = tiny_lora()
    g = torch.Generator().manual_seed(1)
    prefix = torch.randint(3, 500, (40,), generator=g).tolist()
    tails = [torch.randint(3, 500, (n,), generator=g).tolist() for n in (6, 9, 4, 7)]
    ids, mask = right_padded(prefix, tails, actor.tokenizer.pad_token_id)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :40] = -100  # only the answers are scored

    plain_loss, plain_logits, plain_grads = loss_logits_grads(model, ids, mask, labels)
    assert share_prompt_prefix(model) and share_prompt_prefix(model)  # idempotent
    positions = Positions(model)
    loss, logits, grads = loss_logits_grads(model, ids, mask, labels)
    assert positions.seen == [40, ids.numel() - 4 * 40]  # the prefix once, then each row's rest
    assert loss.item() == pytest.approx(plain_loss.item(), abs=1e-5)
    real = mask.bool()
    assert torch.allclose(logits[real], plain_logits[real], atol=1e-4)
    assert grads.keys() == plain_grads.keys() and len(grads) > 0
    for name in grads:
        assert torch.allclose(grads[name], plain_grads[name], atol=1e-5, rtol=1e-3), name


def test_grpos_left_padded_prompts_are_aligned_so_their_prefix_runs_once_with_the_same_numbers():
    """GRPO pads prompts of different lengths on the left and answers on the right: rows are
    left-aligned (the tiny actor is rotary: a shift of every position changes nothing), the
    shared prompt runs once, and log-probs and LoRA gradients equal the plain forward's."""
    actor, model = tiny_lora()
    pad = actor.tokenizer.pad_token_id
    g = torch.Generator().manual_seed(3)
    prefix = torch.randint(3, 500, (30,), generator=g).tolist()
    prompts = [prefix + torch.randint(3, 500, (n,), generator=g).tolist() for n in (2, 5, 3)]
    answers = [torch.randint(3, 500, (n,), generator=g).tolist() for n in (4, 2, 6)]
    width_p, width_a = max(map(len, prompts)), max(map(len, answers))
    ids = torch.full((3, width_p + width_a), pad)
    mask = torch.zeros_like(ids)
    for i, (p, a) in enumerate(zip(prompts, answers)):
        ids[i, width_p - len(p):width_p], ids[i, width_p:width_p + len(a)] = torch.tensor(p), torch.tensor(a)
        mask[i, width_p - len(p):width_p + len(a)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :width_p] = -100

    plain_loss, plain_logits, plain_grads = loss_logits_grads(model, ids, mask, labels)
    share_prompt_prefix(model)
    positions = Positions(model)
    loss, logits, grads = loss_logits_grads(model, ids, mask, labels)
    assert positions.seen == [30, 3 * (ids.shape[1] - 30)]  # the prompt's shared 30 once, then each row's rest
    assert loss.item() == pytest.approx(plain_loss.item(), abs=1e-5)
    real = labels[:, 1:] != -100  # the scored positions' logits (the previous position's output)
    assert torch.allclose(logits[:, :-1][real], plain_logits[:, :-1][real], atol=1e-4)
    for name in plain_grads:
        assert torch.allclose(grads[name], plain_grads[name], atol=1e-5, rtol=1e-3), name


def test_generation_and_calls_without_a_shared_prefix_take_the_backbones_own_forward():
    actor, model = tiny_lora()
    share_prompt_prefix(model)
    positions = Positions(model)
    g = torch.Generator().manual_seed(2)
    short = torch.randint(3, 500, (MIN_SHARED_TOKENS - 1,), generator=g).tolist()
    ids, mask = right_padded(short, [[7, 8], [9, 10, 11]], actor.tokenizer.pad_token_id)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, use_cache=False)  # too short a prefix to pay
        model(input_ids=ids, attention_mask=mask, use_cache=True)  # a cache asked for: generation's call
        model(input_ids=ids[:1], attention_mask=mask[:1], use_cache=False)  # one row
    assert positions.seen == [ids.numel(), ids.numel(), ids.shape[1]]
    prompt = actor.tokenizer(["the same long prompt " * 4] * 2, return_tensors="pt")
    greedy = model.generate(**prompt, max_new_tokens=5, do_sample=False, pad_token_id=actor.tokenizer.pad_token_id)
    assert greedy.shape == (2, prompt["input_ids"].shape[1] + 5) and torch.equal(greedy[0], greedy[1])


def test_a_dpo_step_through_trl_runs_each_batchs_prefix_once(tmp_path):
    """The trainers patch the model they build on (prepare_model): a real DPO step's forward
    hands the backbone the shared prompt once and each of its 2 x pairs rows' rest."""
    from test_train_actor import cfg, small_pairs

    from lactchain.models.actor import Actor
    from lactchain.train.actor import build_trainer

    actor = Actor.load("tiny")
    trainer, _ = build_trainer(actor, small_pairs(actor, 2), cfg(loss="dpo", batch_size=2, max_steps=1, epochs=1),
                               output_dir=tmp_path)
    positions = Positions(trainer.model)
    batch = next(iter(trainer.get_train_dataloader()))
    rows, width = batch["input_ids"].shape
    trainer.model.train()
    trainer.compute_loss(trainer.model, batch).backward()
    shared = shared_prefix_len(batch["input_ids"], batch["attention_mask"])
    assert rows == 4 and shared >= MIN_SHARED_TOKENS
    assert positions.seen == [shared, rows * (width - shared)]


def test_a_trainer_told_not_to_share_runs_every_row_whole(tmp_path):
    """`TrainActorConfig.shared_prefix=False` (what `bench device` times beside the default
    on a GPU) takes the patch off a model an earlier run put it on."""
    from lactchain.models.actor import Actor
    from lactchain.train.actor import prepare_model

    actor = Actor.load("tiny", device="cpu")
    backbone = actor.model.get_decoder()
    prepare_model(actor, shared_prefix=True)
    assert getattr(backbone.forward, "lactchain_shared_prefix", False)
    prepare_model(actor, shared_prefix=False)
    assert "forward" not in vars(backbone) and not getattr(backbone.forward, "lactchain_shared_prefix", False)
    prepare_model(actor)  # the default shares again
    assert getattr(backbone.forward, "lactchain_shared_prefix", False)
