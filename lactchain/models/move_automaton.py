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
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Sequence

import torch

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
    moves_of = _token_moves(dfa, vocab, usable)
    n_states = len(dfa.edges) + 1
    done = n_states - 1
    used = sorted({t for row in moves_of for t in row} | {int(eos_token_id)})
    column = torch.full((vocab_size,), len(used), dtype=torch.long)
    column[torch.tensor(used, dtype=torch.long)] = torch.arange(len(used))
    step = torch.full((n_states, len(used) + 1), NO_STATE, dtype=torch.int32)
    allowed = torch.zeros((n_states, vocab_size), dtype=torch.bool)
    for state, row in enumerate(moves_of):
        if row:
            tokens = torch.tensor(list(row), dtype=torch.long)
            step[state, column[tokens]] = torch.tensor(list(row.values()), dtype=torch.int32)
            allowed[state, tokens] = True
    step[dfa.accept, column[eos_token_id]] = done
    allowed[dfa.accept, eos_token_id] = True
    step[done, :] = done
    allowed[done, eos_token_id] = True
    return TokenAutomaton(allowed=allowed, step=step, column=column, start=dfa.start, done=done)


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


def automaton_for(tokenizer_info: Any, moves: Sequence[str], max_moves: int, eos_token_id: int) -> TokenAutomaton:
    """Tables from an xgrammar `TokenizerInfo` (its decoded vocabulary and special tokens)."""
    return build_token_automaton(
        moves, max_moves, tokenizer_info.decoded_vocab, eos_token_id,
        vocab_size=tokenizer_info.vocab_size, skip=tokenizer_info.special_token_ids,
    )
