"""The `tiny` actor: a seeded random Llama with a word-level tokenizer, built offline in seconds.

It exists for tests and CPU smoke runs. Its vocabulary is the prompt vocabulary
(conversion template, default strategy, GridWorld descriptions, numbers,
punctuation, moves) so every rendered prompt tokenizes without surprises and the
move-list grammar can be written with its tokens.

Tokenization: a regex pre-tokenizer splits text into ` ?word`, ` ?punct` (one
character) and whitespace runs; each piece is one token of a WordLevel model and
the `Fuse` decoder concatenates pieces, so `decode(encode(text)) == text` for any
text made of vocabulary pieces. A lone " " is deliberately NOT a token: a space
always travels with the word or punctuation after it, which keeps the
tokenization of a move list unique (teacher-forced log-probs then match the
sampled ones exactly).
"""

from __future__ import annotations

import string
from pathlib import Path

TINY_SEED = 42  # chosen (among 1234, 1, 2, 3, 7, 42 on vocabulary 2) for varied samples and state-dependent greedy answers
PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPLIT_PATTERN = r" ?\w+| ?[^\w\s]|\s+"
TINY_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}\n{% endif %}"
)
# Bump when the vocabulary or architecture changes, so stale caches are rebuilt.
TINY_VERSION = "3"  # 2: the egocentric goal-direction words; 3: Blackjack's prompt, moves and captions

TINY_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    # Larger than the usual 0.02: logits are spread out (std ~1.6), so greedy choices do
    # not hinge on float rounding, while sampling at T=1 still gives varied move lists.
    initializer_range=0.2,
    tie_word_embeddings=False,
)


def _pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated")


def corpus_texts() -> list[str]:
    """Every text whose pieces go into the tiny vocabulary."""
    from lactchain.envs.gridworld import ORIENTATIONS, GridWorldEnv
    from lactchain.envs.planning import all_states
    from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, format_moves
    from lactchain.prompts import CONVERSION_TEMPLATE, DEFAULT_STRATEGY, render_prompt

    texts = [CONVERSION_TEMPLATE, DEFAULT_STRATEGY]
    for moves in (DEFAULT_MOVES, ALL_MOVES, ALL_MOVES[:1]):
        texts.append(render_prompt(DEFAULT_STRATEGY, "", moves))
        texts.append(format_moves(list(moves)))
    for size in range(2, 17):
        env = GridWorldEnv(size=size, goal=(size - 1, size - 1))
        env.reset()
        texts.append(env.describe())
    texts.extend(GridWorldEnv().describe(s) for s in all_states(4))  # every goal direction phrase
    texts.append(" ".join(ORIENTATIONS) + " " + " ".join(o.capitalize() for o in ORIENTATIONS))
    words = [w for m in ALL_MOVES for w in m.split()]
    texts.append(" ".join(words) + " " + " ".join(w.capitalize() for w in words))
    texts.append(" ".join(str(n) for n in range(100)))
    texts.append(" ".join(f"(x={n}, y={n})" for n in range(100)))  # coordinates without a space
    texts.append(" ".join(f"{n}x{n}" for n in range(1, 33)))
    texts.extend(_blackjack_texts())
    return texts


def _blackjack_texts() -> list[str]:
    """Blackjack's prompt, move list, hand descriptions and caption words."""
    from lactchain.envs.blackjack import BLACKJACK_MOVES, DEFAULT_STRATEGY, OBSERVATION_LABEL, BlackjackTextEnv, start_hands
    from lactchain.moves import format_moves
    from lactchain.prompts import render_prompt

    env = BlackjackTextEnv()
    texts = [render_prompt(DEFAULT_STRATEGY, "", BLACKJACK_MOVES, observation_label=OBSERVATION_LABEL),
             format_moves(list(BLACKJACK_MOVES))]
    texts.extend(h.describe() for h in start_hands())
    for seed in range(40):  # captions of every kind of event: hits, busts, sticks, dealer totals, results
        env.reset(seed=seed)
        _, _, _, _, info = env.step(["hit", "stick"] if seed % 2 else ["stick"])
        texts.append(info["caption"])
    env.reset(seed=0)
    texts.append(env.describe() + " You have a natural blackjack (an ace and a 10)")
    return texts


def build_vocab() -> dict[str, int]:
    pre = _pre_tokenizer()
    pieces: list[str] = []
    for text in corpus_texts():
        pieces.extend(p for p, _ in pre.pre_tokenize_str(text))
    # Every punctuation character and digit alone and after a space, newlines.
    for ch in string.punctuation + string.digits:
        pieces.extend([ch, " " + ch])
    pieces.extend(["\n", "\n\n", "\n\n\n", "\t", "  ", "   ", "    ", " \n", "\n "])
    vocab: dict[str, int] = {}
    for tok in (PAD, BOS, EOS, UNK, *ROLE_TOKENS):
        vocab[tok] = len(vocab)
    for piece in sorted(set(pieces)):
        if piece == " " or piece in vocab:
            continue
        vocab[piece] = len(vocab)
    return vocab


def build_tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = build_vocab()
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = _pre_tokenizer()
    backend.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
        clean_up_tokenization_spaces=False,
        padding_side="left",
        model_max_length=TINY_CONFIG["max_position_embeddings"],
    )
    tok.chat_template = TINY_CHAT_TEMPLATE
    return tok


def build_tiny_model(tokenizer):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model.eval()


def build_tiny(folder: Path) -> Path:
    """Build the tiny model + tokenizer and save them (safetensors) into `folder`."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "TINY_VERSION").write_text(TINY_VERSION + "\n")
    return folder
