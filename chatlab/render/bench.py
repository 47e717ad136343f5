"""Benchmark: id-level rendering vs Hugging Face `apply_chat_template(tokenize=True)`.

    python -m chatlab.render.bench [--n 1000] [--model smollm2-135m-instruct]

Renders the same N multi-turn conversations both ways on the same tokenizer and prints the
time of each and the ratio (HF time / chatlab time; above 1 means chatlab is faster). Both the
built-in template and the tokenizer's own template through chatlab's safe Jinja path are timed.
"""
from __future__ import annotations

import argparse
import random
import time
from typing import Callable

from chatlab._thirdparty import Jsonable

WORDS = ("the model reads token ids not text so every role marker must be exactly one id "
         "while content stays plain text even when it looks like a control token 你好 世界").split()


def conversations(n: int, seed: int = 0) -> list[list[dict[str, Jsonable]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = [{"role": "system", "content": "You are a helpful assistant."}]
        for turn in range(rng.randint(1, 4)):
            msgs.append({"role": "user", "content": " ".join(rng.choices(WORDS, k=rng.randint(5, 40)))})
            msgs.append({"role": "assistant", "content": " ".join(rng.choices(WORDS, k=rng.randint(5, 60)))})
        msgs.append({"role": "user", "content": " ".join(rng.choices(WORDS, k=rng.randint(5, 40)))})
        out.append(msgs)
    return out


def _time(fn: Callable[[list[dict[str, Jsonable]]], object], convs: list) -> float:
    start = time.perf_counter()
    for msgs in convs:
        fn(msgs)
    return time.perf_counter() - start


def run(n: int = 1000, model: str = "smollm2-135m-instruct", template: str = "smollm2") -> dict[str, float]:
    from chatlab.models import load_tokenizer
    from chatlab.render import resolve

    tok = load_tokenizer(model)
    convs = conversations(n)
    builtin, jinja = resolve(tok, model, template), resolve(tok, model)
    for msgs in convs[:20]:  # warm up both paths (template compile, plain twin, caches)
        builtin.render(msgs)
        jinja.render(msgs)
        tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
    hf = _time(lambda m: tok.apply_chat_template(m, tokenize=True, add_generation_prompt=True), convs)
    ours = _time(lambda m: builtin.render(m).ids, convs)
    safe = _time(lambda m: jinja.render(m).ids, convs)
    return {"n": n, "hf_s": hf, "builtin_s": ours, "jinja_safe_s": safe,
            "ratio_builtin": hf / ours, "ratio_jinja_safe": hf / safe}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--template", default="smollm2")
    args = parser.parse_args()
    r = run(args.n, args.model, args.template)
    print(f"{r['n']} multi-turn conversations, tokenizer {args.model}")
    print(f"  HF apply_chat_template(tokenize=True): {r['hf_s'] * 1e3:8.1f} ms")
    print(f"  chatlab id-level ({args.template}):      {r['builtin_s'] * 1e3:8.1f} ms  ratio {r['ratio_builtin']:.2f}x")
    print(f"  chatlab safe Jinja path:               {r['jinja_safe_s'] * 1e3:8.1f} ms  ratio {r['ratio_jinja_safe']:.2f}x")
    print("  (ratio = HF time / chatlab time; >= 1 means at least as fast)")


if __name__ == "__main__":
    main()
