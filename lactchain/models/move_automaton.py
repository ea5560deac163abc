"""The move-list grammar as a token-level automaton held in tensors: constrained
decoding with no host work per token.

`move_list_grammar` (xgrammar's EBNF) allows `['a', 'b']` with 1..max_moves moves
from a fixed list: a finite, tiny language. Its character automaton has a few
hundred states; crossing it with the tokenizer's vocabulary gives, per state, the
tokens whose bytes it can read in full and the state each leads to. Held on the
model's device as two tables -- `allowed[state]` (a vocabulary mask) and
`step[state, column]` (next state) -- a decoding step is one gather and one
`masked_fill` for the whole batch: no `.item()`, no Python loop over rows, nothing
for a GPU to wait on (xgrammar's HF processor accepts each row's token on the host
and fills each row's mask in a Python loop).

Same language as xgrammar's matcher over the same vocabulary (xgrammar decodes the
tokens: `TokenizerInfo.decoded_vocab`), so greedy answers are identical; a test
holds both to that.

That language admits every tokenization of a list's text: `move` as one token or as
`mo` + `ve`. `build_canonical_token_automaton` admits only the tokenizer's own
tokenization of each list (what the trainers score a list as): a policy trained under
the grammar-masked distribution (GRPO's `--policy-logprobs constrained`) then cannot
move its mass onto spellings in pieces, which on SmolLM2 made half of one run's answers
too long for the token cap. It enumerates the lists, so it is for small move sets
(`lactchain.moves.CANONICAL_MAX_LISTS`).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from lactchain.moves import check_enumerable, format_moves

NO_STATE = -1


@dataclass
class _CharAutomaton:
    """Byte-level DFA: `edges[state]` maps a byte to the next state."""

    edges: list[dict[int, int]]
    start: int
    accept: int

    def new_state(self) -> int:
        self.edges.append({})
        return len(self.edges) - 1


def move_list_automaton(moves: Sequence[str], max_moves: int) -> _CharAutomaton:
    """The DFA of `move_list_grammar(moves, max_moves)`: '[' move (', ' move)* ']'."""
    if max_moves < 1:
        raise ValueError(f"max_moves must be >= 1, got {max_moves}")
    if not moves:
        raise ValueError("the move vocabulary is empty")
    dfa = _CharAutomaton(edges=[{}, {}], start=0, accept=1)
    # One trie of the quoted moves per list position k (moves read so far); its leaves
    # lead to `after[k + 1]`, which reads ']' or, below max_moves, ', ' and the next move.
    after = [NO_STATE] + [dfa.new_state() for _ in range(max_moves)]
    firsts = []
    for k in range(max_moves):
        root = dfa.new_state()
        firsts.append(root)
        for move in moves:
            node = root
            for byte in f"'{move}'".encode()[:-1]:
                if byte not in dfa.edges[node]:
                    dfa.edges[node][byte] = dfa.new_state()
                node = dfa.edges[node][byte]
            dfa.edges[node][ord("'")] = after[k + 1]
    dfa.edges[dfa.start][ord("[")] = firsts[0]
    for k in range(1, max_moves + 1):
        dfa.edges[after[k]][ord("]")] = dfa.accept
        if k < max_moves:
            space = dfa.new_state()
            dfa.edges[after[k]][ord(",")] = space
            dfa.edges[space][ord(" ")] = firsts[k]
    return dfa


def _token_moves(dfa: _CharAutomaton, vocab: Sequence[bytes], usable: Sequence[int]) -> list[dict[int, int]]:
    """Per DFA state, {token id: state after reading all its bytes}. The tokens are
    sorted by their bytes, so the tokens that start with a path's bytes are one range
    (bisect): a walk visits only the paths the grammar allows."""
    order = sorted(usable, key=lambda t: vocab[t])
    keys = [vocab[t] for t in order]
    out: list[dict[int, int]] = [{} for _ in dfa.edges]

    def walk(origin: int, state: int, prefix: bytes, lo: int, hi: int) -> None:
        i = lo
        while i < hi and keys[i] == prefix:  # tokens that are exactly this path
            out[origin][order[i]] = state
            i += 1
        for byte, nxt in dfa.edges[state].items():
            ext = prefix + bytes([byte])
            a = bisect.bisect_left(keys, ext, i, hi)
            b = bisect.bisect_left(keys, prefix + bytes([byte + 1]), a, hi) if byte < 255 else hi
            if a < b:
                walk(origin, nxt, ext, a, b)

    for state in range(len(dfa.edges)):
        walk(state, state, b"", 0, len(keys))
    return out


@dataclass
class TokenAutomaton:
    """The grammar x vocabulary tables, on one device. `allowed` is (states, vocab)
    bool; `step` is (states, columns) int32 over the tokens the grammar ever uses
    (`column[token]`, the last column for every other token)."""

    allowed: torch.Tensor
    step: torch.Tensor
    column: torch.Tensor
    start: int
    done: int

    def to(self, device: torch.device | str) -> "TokenAutomaton":
        return TokenAutomaton(self.allowed.to(device), self.step.to(device), self.column.to(device),
                              self.start, self.done)

    @property
    def device(self) -> torch.device:
        return self.allowed.device


def build_token_automaton(
    moves: Sequence[str],
    max_moves: int,
    vocab: Sequence[bytes],
    eos_token_id: int,
    vocab_size: int,
    skip: Sequence[int] = (),
) -> TokenAutomaton:
    """Tables for `move_list_grammar(moves, max_moves)` over `vocab` (each token's
    bytes; xgrammar's `decoded_vocab`). `skip` (special tokens) and empty tokens are
    never allowed; EOS only once the list is closed; after EOS only EOS again (what
    generate feeds a finished row is padding, and its logits must stay finite)."""
    dfa = move_list_automaton(moves, max_moves)
    banned = set(int(t) for t in skip) | {int(eos_token_id)}
    usable = [t for t in range(min(len(vocab), vocab_size)) if vocab[t] and t not in banned]
    return _tables(_token_moves(dfa, vocab, usable), [dfa.accept], dfa.start, eos_token_id, vocab_size)


def build_canonical_token_automaton(
    moves: Sequence[str],
    max_moves: int,
    encode: Callable[[list[str]], list[list[int]]],
    eos_token_id: int,
    vocab_size: int,
) -> TokenAutomaton:
    """Tables that admit, for each list of `move_list_grammar(moves, max_moves)`, only
    `encode(text)` -- the tokenizer's own tokenization of its text -- then EOS. The lists'
    token sequences go into a trie, which is then minimised (an acyclic automaton: states
    with the same future merge), so the tables stay as small as the grammar's."""
    check_enumerable(moves, max_moves)
    texts = [format_moves(combo) for n in range(1, max_moves + 1) for combo in itertools.product(moves, repeat=n)]
    trie: list[dict[int, int]] = [{}]
    ends: set[int] = set()
    for ids in encode(texts):
        node = 0
        for token in ids:
            nxt = trie[node].get(int(token))
            if nxt is None:
                trie.append({})
                nxt = trie[node][int(token)] = len(trie) - 1
            node = nxt
        ends.add(node)
    # A child is numbered after its parent, so walking the numbers down sees every
    # state's children before it: each state's future is then (accepts, its edges).
    merged: dict[tuple[bool, tuple[tuple[int, int], ...]], int] = {}
    rows: list[dict[int, int]] = []
    accepting: list[int] = []
    rep = [0] * len(trie)
    for node in range(len(trie) - 1, -1, -1):
        edges = {token: rep[child] for token, child in trie[node].items()}
        key = (node in ends, tuple(sorted(edges.items())))
        if key not in merged:
            merged[key] = len(rows)
            rows.append(edges)
            if node in ends:
                accepting.append(merged[key])
        rep[node] = merged[key]
    return _tables(rows, accepting, rep[0], eos_token_id, vocab_size)


def _tables(rows: Sequence[dict[int, int]], accepting: Sequence[int], start: int, eos_token_id: int,
            vocab_size: int) -> TokenAutomaton:
    """The tensors of an automaton given per state {token: next state}: EOS is allowed
    only in `accepting` states and leads to `done`, where only EOS is allowed again
    (what generate feeds a finished row is padding, and its logits must stay finite)."""
    n_states = len(rows) + 1
    done = n_states - 1
    used = sorted({t for row in rows for t in row} | {int(eos_token_id)})
    column = torch.full((vocab_size,), len(used), dtype=torch.long)
    column[torch.tensor(used, dtype=torch.long)] = torch.arange(len(used))
    step = torch.full((n_states, len(used) + 1), NO_STATE, dtype=torch.int32)
    allowed = torch.zeros((n_states, vocab_size), dtype=torch.bool)
    for state, row in enumerate(rows):
        if row:
            tokens = torch.tensor(list(row), dtype=torch.long)
            step[state, column[tokens]] = torch.tensor(list(row.values()), dtype=torch.int32)
            allowed[state, tokens] = True
    for state in accepting:
        step[state, column[eos_token_id]] = done
        allowed[state, eos_token_id] = True
    step[done, :] = done
    allowed[done, eos_token_id] = True
    return TokenAutomaton(allowed=allowed, step=step, column=column, start=start, done=done)


def advance(automaton: TokenAutomaton, state: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Each row's state after reading its token; a token the grammar does not allow there
    leads to `done` (where only EOS is allowed)."""
    a = automaton
    nxt = a.step[state, a.column[tokens.to(a.device)]].long()
    return torch.where(nxt == NO_STATE, torch.full_like(nxt, a.done), nxt)


def states_along(automaton: TokenAutomaton, tokens: torch.Tensor) -> torch.Tensor:
    """(B, T) grammar state before each of `tokens` (B, T completions from the start of
    the answer): what `AutomatonProcessor` masked each position with when it sampled
    them. A token the grammar does not allow (padding past the end) leads to `done`."""
    a = automaton
    state = torch.full((tokens.shape[0],), a.start, dtype=torch.long, device=a.device)
    states = []
    for j in range(tokens.shape[1]):
        states.append(state)
        state = advance(a, state, tokens[:, j])
    return torch.stack(states, 1) if states else torch.zeros((tokens.shape[0], 0), dtype=torch.long, device=a.device)


class AutomatonProcessor:
    """transformers logits processor: masks every row to the tokens its grammar state
    allows, advancing the states from the last sampled tokens, all on the scores'
    device. Stateful: one per `generate` call."""

    def __init__(self, automaton: TokenAutomaton) -> None:
        self.automaton = automaton
        self.state: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        a = self.automaton
        if self.state is None:  # the first call sees only the prompt
            self.state = torch.full((input_ids.shape[0],), a.start, dtype=torch.long, device=a.device)
        else:
            self.state = advance(a, self.state, input_ids[:, -1])
        mask = a.allowed[self.state].to(scores.device)
        if mask.shape[1] < scores.shape[1]:  # logits wider than the tokenizer's vocabulary
            mask = torch.nn.functional.pad(mask, (0, scores.shape[1] - mask.shape[1]))
        return scores.masked_fill(~mask[:, : scores.shape[1]], float("-inf"))


def automaton_for(tokenizer_info: Any, moves: Sequence[str], max_moves: int, eos_token_id: int,
                  encode: Callable[[list[str]], list[list[int]]] | None = None) -> TokenAutomaton:
    """Tables from an xgrammar `TokenizerInfo` (its decoded vocabulary and special tokens);
    with `encode` (the tokenizer's batch encoding) those of the canonical spellings only."""
    if encode is not None:
        return build_canonical_token_automaton(moves, max_moves, encode, eos_token_id, tokenizer_info.vocab_size)
    return build_token_automaton(
        moves, max_moves, tokenizer_info.decoded_vocab, eos_token_id,
        vocab_size=tokenizer_info.vocab_size, skip=tokenizer_info.special_token_ids,
    )
