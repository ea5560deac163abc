"""The `tiny` actor: a seeded random Llama with a word-level tokenizer, built offline in seconds.

It exists for tests and CPU smoke runs. Its vocabulary is the prompt vocabulary
(conversion template, numbers, punctuation, and every env's `vocabulary_texts()`:
its strategy, descriptions, moves and captions) so every rendered prompt tokenizes
without surprises and the move-list grammar can be written with its tokens. A new
env's words join the vocabulary by themselves; `vocabulary_fingerprint()` names the
built model's folder, so a cached build with another vocabulary is never reused.

Tokenization: a regex pre-tokenizer splits text into ` ?word`, ` ?punct` (one
character) and whitespace runs; each piece is one token of a WordLevel model and
the `Fuse` decoder concatenates pieces, so `decode(encode(text)) == text` for any
text made of vocabulary pieces. A lone " " is deliberately NOT a token: a space
always travels with the word or punctuation after it, which keeps the
tokenization of a move list unique (teacher-forced log-probs then match the
sampled ones exactly).
"""

from __future__ import annotations

import functools
import hashlib
import os
import string
from pathlib import Path

from lactchain.envs.catalog import ENVS, env_class, make_env

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
    """Every text whose pieces go into the tiny vocabulary: the conversion template,
    numbers, and each env's own `vocabulary_texts()` (its prompts, descriptions, moves
    and captions), for every env of the catalog."""
    from lactchain.prompts import CONVERSION_TEMPLATE

    texts = [CONVERSION_TEMPLATE]
    texts.append(" ".join(str(n) for n in range(100)))
    for name in ENVS:
        texts.extend(make_env(name).vocabulary_texts())
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
    hazards = move_prefixes()
    for piece in sorted(set(pieces)):
        if piece == " " or piece in vocab or piece in hazards:
            continue
        vocab[piece] = len(vocab)
    return vocab


def move_prefixes() -> set[str]:
    """Pieces the vocabulary leaves out (they read as <unk>): a proper prefix of a word of
    any env's moves ("drop" of "dropoff", "s" of "south"), with or without its space.
    Constrained decoding accepts any tokens that spell the grammar's text, and a move begun
    with such a piece could only be finished by pieces that may not exist ("drop" + "of" +
    "f"): without them, a move is spelled by its own token alone, so the grammar can never
    dead-end and every constrained answer tokenizes back to the tokens sampled."""
    words = {w for name in ENVS for move in env_class(name).all_moves for w in move.split()}
    prefixes = {p for w in words for k in range(1, len(w)) for p in (w[:k], " " + w[:k])}
    return prefixes - words - {" " + w for w in words}


@functools.lru_cache(maxsize=1)
def vocabulary_fingerprint() -> str:
    """A short hash of the vocabulary: part of the tiny model's cache key (a new env's
    words change the vocabulary and so the model).

    Building the vocabulary builds every env of the catalog (~0.6 s on a 2-core CPU, in
    every process that loads `tiny`), so the fingerprint is kept on disk under the hash of
    the package's own source (~15 ms to read): any change to the code computes it again."""
    from lactchain.paths import models_dir

    memo = models_dir() / ".tiny-vocabulary" / _source_hash()
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    vocab = build_vocab()
    fingerprint = hashlib.sha1("\n".join(sorted(vocab, key=vocab.__getitem__)).encode()).hexdigest()[:8]
    try:  # best effort: a read-only models folder only costs the rebuild next time
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
        tmp.write_text(fingerprint)
        os.replace(tmp, memo)
        for older in memo.parent.iterdir():  # one entry per source version ever run would pile up
            if older.name != memo.name and not older.name.startswith("."):
                older.unlink(missing_ok=True)
    except OSError:
        pass
    return fingerprint


def _source_hash() -> str:
    """A hash of every module of the `lactchain` package (paths and bytes): what the
    vocabulary is computed from (the env catalog, the envs, the prompts)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
