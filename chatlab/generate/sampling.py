"""Sampling parameters and the sampler: greedy is one `argmax`; sampling cuts to top-k by `argpartition`."""
from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, field, replace

import numpy as np

from chatlab.errors import ChatlabError
from chatlab.generate import limits
from chatlab.generate.logprobs import MAX_TOP_LOGPROBS

MAX_CANDIDATES = 1000  # sampling never looks past these: the rest of the row is negligible


@dataclass
class SamplingParams:
    """What to generate (`temperature` 0: greedy; `top_k` 0: no cut), its ranges checked when made unless
    `trusted` (a request model checked them); `validate` checks what depends on the model."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    # OpenAI's penalties over the reply's own tokens, not the prompt's (Sampler.penalize_reply)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False  # benchmarks: do not stop on the model's own eos ids
    # token id (or its digit string) -> bias in [-100, 100], added after any grammar mask
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: bool = False  # report each generated token's logprob (see chatlab.generate.logprobs)
    top_logprobs: int = 0  # and this many most likely alternatives per token (0..20)
    # what `validated` checked these values against, so the loop does not check them again
    checked_for: tuple[object, ...] | None = field(default=None, compare=False, repr=False)
    trusted: InitVar[bool] = False

    def __post_init__(self, trusted: bool) -> None:
        if trusted:
            return
        if isinstance(self.stop, str):  # a lone string is a common slip; accept it
            self.stop = [self.stop]
        self.logit_bias = check_logit_bias(self.logit_bias, None)

        def bad(name: str, value: object, valid: str) -> ChatlabError:
            return ChatlabError(f"{name}={value!r} is invalid; it must be {valid}", param=name)

        if not _is_int(self.max_new_tokens) or not limits.MAX_NEW_TOKENS.holds(self.max_new_tokens):
            raise bad("max_new_tokens", self.max_new_tokens, "an integer >= 1")
        for name, rng in (("temperature", limits.TEMPERATURE), ("top_p", limits.TOP_P),
                          ("repetition_penalty", limits.REPETITION_PENALTY),
                          ("presence_penalty", limits.PRESENCE_PENALTY),
                          ("frequency_penalty", limits.FREQUENCY_PENALTY)):
            value = getattr(self, name)
            if not _finite(value) or not rng.holds(value):
                raise bad(name, value, f"a number {rng.describe()}")
        if not _is_int(self.top_k) or not limits.TOP_K.holds(self.top_k):
            raise bad("top_k", self.top_k, f"an integer {limits.TOP_K.describe()}")
        if self.seed is not None and not _is_int(self.seed):
            raise bad("seed", self.seed, "an integer or None")
        if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop):
            raise bad("stop", self.stop, "a list of non-empty strings")
        if not all(_is_int(i) and i >= 0 for i in self.stop_ids):
            raise bad("stop_ids", self.stop_ids, "a list of token ids (integers >= 0)")
        if not isinstance(self.logprobs, bool):
            raise bad("logprobs", self.logprobs, "true or false")
        if not _is_int(self.top_logprobs) or not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise bad("top_logprobs", self.top_logprobs, f"an integer from 0 to {MAX_TOP_LOGPROBS}")
        if self.top_logprobs and not self.logprobs:
            raise ChatlabError(f"top_logprobs={self.top_logprobs} needs logprobs=true; set logprobs "
                               "to true or drop top_logprobs", param="top_logprobs")

    def validate(self, context_length: int | None = None, prompt_tokens: int = 0,
                 vocab_size: int | None = None) -> None:
        """What depends on the model: the reply fits the window, logit_bias ids are in the vocabulary."""
        if context_length is not None and prompt_tokens + self.max_new_tokens > context_length:
            room = context_length - prompt_tokens
            raise ChatlabError(f"max_new_tokens={self.max_new_tokens} does not fit: the prompt has "
                               f"{prompt_tokens} tokens and the context window is {context_length}; use "
                               f"max_new_tokens <= {max(room, 0)} or a shorter prompt", param="max_tokens")
        check_logit_bias(self.logit_bias, vocab_size)

    def _model_key(self, context_length: int | None, prompt_tokens: int,
                   vocab_size: int | None) -> tuple[object, ...]:
        # everything `validate` reads: a value changed after the check changes the key
        return (context_length, prompt_tokens, vocab_size, self.max_new_tokens,
                tuple(sorted(self.logit_bias.items())))

    def validated(self, context_length: int | None = None, prompt_tokens: int = 0,
                  vocab_size: int | None = None) -> "SamplingParams":
        """`validate`, then a copy that records what it was checked against."""
        self.validate(context_length, prompt_tokens, vocab_size)
        return replace(self, checked_for=self._model_key(context_length, prompt_tokens, vocab_size), trusted=True)

    def checked(self, context_length: int | None, prompt_tokens: int, vocab_size: int | None) -> bool:
        return self.checked_for == self._model_key(context_length, prompt_tokens, vocab_size)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    @property
    def penalized(self) -> bool:
        """Whether the sampler must keep the reply's token counts (OpenAI's two penalties)."""
        return self.presence_penalty != 0 or self.frequency_penalty != 0


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_logit_bias(bias: object, vocab_size: int | None = None) -> dict[int, float]:
    """The bias map with int keys; ChatlabError (param "logit_bias") for what OpenAI refuses."""
    if bias is None:
        return {}
    if not isinstance(bias, dict):
        raise ChatlabError(f"logit_bias={bias!r} is invalid; it must be an object mapping token ids "
                           "to numbers, like {\"50256\": -100}", param="logit_bias")
    out: dict[int, float] = {}
    for key, value in bias.items():
        token = int(key) if isinstance(key, str) and key.isascii() and key.isdigit() else key
        if not _is_int(token) or token < 0 or (vocab_size is not None and token >= vocab_size):
            valid = f"0..{vocab_size - 1}" if vocab_size is not None else "integers >= 0"
            raise ChatlabError(f"logit_bias key {key!r} is not a token id of this model; keys must "
                               f"be token ids ({valid}); encode the text with the model's tokenizer",
                               param="logit_bias")
        if token in out:
            raise ChatlabError(f"logit_bias names token {token} twice; give each token id once",
                               param="logit_bias")
        if not _finite(value) or not limits.LOGIT_BIAS.holds(value):
            raise ChatlabError(f"logit_bias[{key!r}]={value!r} is invalid; biases must be numbers "
                               "from -100 (ban the token) to 100 (force it)", param="logit_bias")
        out[token] = float(value)
    return out


class Sampler:
    """Picks the next token from a logits row; holds the seeded random generator."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self.rng = np.random.default_rng(params.seed)
        self.seen: list[int] = []  # ids the repetition penalty applies to (prompt + output)
        self.counts: dict[int, int] = {}  # the reply's ids and how often each came (penalties)
        # logit_bias as two arrays, so applying it is one fancy-indexed add per token
        self.bias_ids = np.fromiter(params.logit_bias, dtype=np.int64, count=len(params.logit_bias))
        self.bias_values = np.fromiter(params.logit_bias.values(), dtype=np.float32,
                                       count=len(params.logit_bias))

    def accept(self, token: int) -> None:
        if self.params.repetition_penalty != 1.0:
            self.seen.append(token)
        if self.params.penalized:
            self.counts[token] = self.counts.get(token, 0) + 1

    def bias(self, logits: np.ndarray) -> np.ndarray:
        """Add logit_bias in place (a read-only row is copied first), before logprobs are taken."""
        if self.bias_ids.size:
            if not logits.flags.writeable:
                logits = logits.copy()
            logits[self.bias_ids] += self.bias_values
        return logits

    def penalize(self, logits: np.ndarray) -> None:
        """CTRL-style repetition penalty, in place: divide positive logits, multiply negative."""
        rp = self.params.repetition_penalty
        if rp == 1.0 or not self.seen:
            return
        ids = np.unique(np.asarray(self.seen, dtype=np.int64))
        vals = logits[ids]
        logits[ids] = np.where(vals > 0, vals / rp, vals * rp)

    def penalize_reply(self, logits: np.ndarray) -> None:
        """OpenAI's presence and frequency penalties, in place, over the reply's tokens only."""
        p = self.params
        if not p.penalized or not self.counts:
            return
        ids = np.fromiter(self.counts, dtype=np.int64, count=len(self.counts))
        counts = np.fromiter(self.counts.values(), dtype=np.float32, count=len(self.counts))
        logits[ids] -= np.float32(p.presence_penalty) + np.float32(p.frequency_penalty) * counts

    def _penalized(self, logits: np.ndarray) -> np.ndarray:
        if (self.seen or self.counts) and not logits.flags.writeable:
            logits = logits.copy()
        self.penalize(logits)
        self.penalize_reply(logits)
        return logits

    def __call__(self, logits: np.ndarray) -> int:
        """Penalties, then greedy or temperature/top-k/top-p (logit_bias is `bias`, applied first)."""
        logits = self._penalized(logits)
        if self.params.greedy:
            return int(np.argmax(logits))
        ids, probs = self._candidates(logits)
        return int(ids[self.rng.choice(len(ids), p=probs)])

    def _candidates(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        k = min(p.top_k or MAX_CANDIDATES, MAX_CANDIDATES, logits.shape[0])
        ids, probs = top_k_probs(logits, k, p.temperature)
        if p.top_p < 1.0:
            ids, probs = top_p_filter(ids, probs, p.top_p)
        return ids, probs

    def check_draft(self, logits: np.ndarray, draft: int) -> tuple[int, bool]:
        """(the token to emit where a draft guessed `draft`, whether the guess stands). Sampling accepts it
        with probability p(draft), else samples p without it: plain sampling's distribution (not stream)."""
        logits = self._penalized(logits)
        if self.params.greedy:
            token = int(np.argmax(logits))
            return token, token == draft
        ids, probs = self._candidates(logits)
        hit = np.flatnonzero(ids == draft)
        p_draft = float(probs[hit[0]]) if hit.size else 0.0
        if p_draft > 0.0 and self.rng.random() < p_draft:
            return draft, True
        if hit.size:
            probs = probs.copy()
            probs[hit[0]] = 0.0
            probs /= probs.sum()  # p_draft < 1 here: a sure draft is always accepted above
        return int(ids[self.rng.choice(len(ids), p=probs)]), False


def top_k_probs(logits: np.ndarray, k: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """The k best ids, sorted best first, and their softmax(logits / T) renormalized over them."""
    ids = np.argpartition(logits, -k)[-k:] if k < logits.shape[0] else np.arange(logits.shape[0])
    ids = ids[np.argsort(-logits[ids], kind="stable")]
    z = logits[ids].astype(np.float64) / temperature
    z -= z[0]  # the max, so exp never overflows
    probs = np.exp(z)
    return ids, probs / probs.sum()


def top_p_filter(ids: np.ndarray, probs: np.ndarray, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """Keep the smallest best-first prefix whose mass reaches top_p (always at least one)."""
    cut = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
    kept = probs[:cut]
    return ids[:cut], kept / kept.sum()
