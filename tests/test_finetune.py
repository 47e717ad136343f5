"""chatlab.lab.finetune: the training ids and loss mask, a LoRA run, merging, and the shipped data."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from chatlab.lab import finetune as ft
from chatlab.errors import ChatlabError

DATA = Path(__file__).resolve().parents[1] / "data" / "finetune"
SYSTEM = "You are Captain Byte, a pirate who answers in one sentence and ends with 'Arr!'."
CHAT = [{"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris be the capital of France, matey. Arr!"},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome, matey. Arr!"}]


def _training(tokenizer: Any) -> Any:
    """The shape of data/finetune's training template (ChatML + a default system prompt),
    built from chatlab's own pieces."""
    from chatlab.render.template import CHATML_ROLES
    from chatlab.render import Resolution
    from chatlab.render.template import Template

    t = Template("captain_byte", "training template", CHATML_ROLES, default_system=SYSTEM,
                 stop_tokens=("<|im_end|>",))
    return Resolution("explicit", "test", t.name, tokenizer, template=t)


def _labelled(example: ft.Example) -> list[list[int]]:
    """Runs of consecutive labelled ids."""
    runs: list[list[int]] = []
    prev = False
    for tid, lab in zip(example.ids, example.labels):
        on = lab != ft.IGNORE
        if on:
            assert lab == tid
            (runs[-1].append(tid) if prev else runs.append([tid]))
        prev = on
    return runs


@pytest.mark.parametrize("which", ["training-template", "tokenizer-jinja"])
def test_loss_mask_is_exactly_the_assistant_turns(smollm2_tokenizer: Any, which: str) -> None:
    from chatlab.render import resolve

    tok = smollm2_tokenizer
    res = _training(tok) if which == "training-template" else resolve(tok, "smollm2-135m-instruct")
    ex = ft.training_example(res, CHAT)
    assert ex.ids == res.render(CHAT, add_generation_prompt=False).ids
    runs = [tok.decode(r) for r in _labelled(ex)]
    # each assistant answer, then the id the server stops on; nothing of system/user/headers
    assert runs == [CHAT[1]["content"] + "<|im_end|>", CHAT[3]["content"] + "<|im_end|>"]


def test_a_chat_without_an_answer_is_refused(smollm2_tokenizer: Any) -> None:
    with pytest.raises(ChatlabError, match="no assistant message"):
        ft.training_example(_training(smollm2_tokenizer), CHAT[:1])


def test_load_chats_reads_alpaca_and_messages_rows(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps({"instruction": "Add", "input": "2 and 2", "output": "4. Arr!"}) + "\n\n"
                 + json.dumps({"instruction": "Only a question"}) + "\n"
                 + json.dumps({"messages": CHAT}) + "\n")
    chats = ft.load_chats(f)
    assert chats[0] == [{"role": "user", "content": "Add\n2 and 2"}, {"role": "assistant", "content": "4. Arr!"}]
    assert chats[1] == [{"role": "user", "content": "Only a question"}]
    assert chats[2] == CHAT
    f.write_text('{"question": "x"}\n')
    with pytest.raises(ChatlabError, match="instruction"):
        ft.load_chats(f)
    f.write_text("not json\n")
    with pytest.raises(ChatlabError, match=":1 is not JSON"):
        ft.load_chats(f)


def test_shipped_dataset_and_training_template() -> None:
    train = ft.load_chats(DATA / "train.jsonl")
    held = ft.load_chats(DATA / "heldout.jsonl")
    assert len(train) == 60 and len(held) == 20
    assert all(c[-1]["role"] == "assistant" and c[-1]["content"].endswith(" Arr!") for c in train)
    assert all(len(c) == 1 for c in held)  # questions only
    assert not {c[0]["content"] for c in train} & {c[0]["content"] for c in held}
    slots = json.loads((DATA / "captain_byte.llamafactory.json").read_text())
    assert slots["default_system"] == SYSTEM and slots["stop_words"] == ["<|im_end|>"]
    assert slots["format_user"] == "<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n"
    assert ft.persona_rate(["Yes. Arr!", "No.", "Arr! no"]) == pytest.approx(1 / 3)
    assert ft.first_difference([1, 2, 3], [1, 2, 4]) == 2
    assert ft.first_difference([1, 2], [1, 2, 5]) == 2 and ft.first_difference([1], [1]) is None


@pytest.fixture(scope="module")
def trained(smollm2: tuple[Any, Any]) -> tuple[Any, Any, Any, Any]:
    """A LoRA around a copy of the shared model (add_lora wraps layers in place), before/after
    two steps: (peft model, tokenizer, LoRA weights before, base weights before)."""
    model, tok = smollm2
    pm = ft.add_lora(copy.deepcopy(model), rank=4, seed=0)
    lora0 = {n: p.detach().clone() for n, p in pm.named_parameters() if p.requires_grad}
    base0 = {n: p.detach().clone() for n, p in pm.named_parameters() if not p.requires_grad}
    examples = [ft.training_example(_training(tok), c) for c in ft.load_chats(DATA / "train.jsonl")[:4]]
    report = ft.train(pm, examples, steps=2, batch_size=2, lr=5e-3, threads=None)
    assert report.steps == 2 and len(report.losses) == 2 and report.trainable < report.total / 100
    return pm, tok, lora0, base0


@pytest.mark.slow
def test_two_steps_change_the_adapter_and_not_the_base(trained: tuple[Any, Any, Any, Any]) -> None:
    import torch

    pm, _, lora0, base0 = trained
    assert lora0 and all("lora_" in n for n in lora0)
    now = dict(pm.named_parameters())
    assert any(not torch.equal(now[n], p) for n, p in lora0.items() if "lora_B" in n)
    assert all(torch.equal(now[n], p) for n, p in base0.items())


@pytest.mark.slow
def test_micro_batches_take_the_step_of_a_whole_batch(smollm2: tuple[Any, Any]) -> None:
    """Gradient accumulation must divide by the whole batch's scored tokens: a per-micro-batch
    mean would weight short examples more, and the loss and the adapter would come out different.
    Examples of unequal length make that visible."""
    import torch

    model, tok = smollm2
    examples = [ft.training_example(_training(tok), c) for c in ft.load_chats(DATA / "train.jsonl")[:4]]
    assert len({len(e.ids) for e in examples}) > 1
    runs = {}
    for micro in (None, 1, 3):
        pm = ft.add_lora(copy.deepcopy(model), rank=4, seed=0)
        report = ft.train(pm, examples, steps=2, batch_size=4, lr=5e-3, threads=None, micro_batch=micro)
        runs[micro] = report.losses, {n: p.detach().clone() for n, p in pm.named_parameters() if "lora_B" in n}
    whole_losses, whole = runs[None]
    for micro in (1, 3):
        losses, weights = runs[micro]
        assert losses == pytest.approx(whole_losses, rel=1e-4), micro
        # Adam rescales each update to ~lr, so float-order noise shows at ~1e-5 of the ~1e-2 steps
        # -- except where a gradient element is ~0: there Adam's m/sqrt(v) turns noise into a
        # full-size step. On an AMX Xeon 5 of 307,200 elements moved by up to 4e-4 (mean |diff|
        # 2.5e-8 against mean |w| 7.8e-3). A wrong normalisation moves nearly every element.
        diff = torch.cat([(weights[n] - w).abs().flatten() for n, w in whole.items()])
        size = torch.cat([w.abs().flatten() for w in whole.values()])
        assert diff.mean() < 1e-4 * size.mean(), micro
        assert (diff > 1e-4).float().mean() < 1e-3, micro
    with pytest.raises(ChatlabError, match="micro_batch=0"):
        ft.train(pm, examples, steps=1, micro_batch=0)


@pytest.mark.slow
def test_merge_and_saved_adapter_answer_like_the_adapter(trained: tuple[Any, Any, Any, Any],
                                                         smollm2: tuple[Any, Any], tmp_path: Path) -> None:
    import torch

    pm, tok, _, _ = trained
    res = _training(tok)
    chats = [[{"role": "user", "content": "What is the capital of Spain?"}]]
    adapter = ft.answers(pm, tok, res, chats, max_new_tokens=12)
    with pm.disable_adapter():
        base = ft.answers(pm, tok, res, chats, max_new_tokens=12)
    merged = ft.merged(pm)
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    assert ft.answers(merged, tok, res, chats, max_new_tokens=12)[0].token_ids == adapter[0].token_ids
    loaded = ft.load_adapter(copy.deepcopy(smollm2[0]), ft.save_adapter(pm, tmp_path / "adapter"))
    assert ft.answers(loaded, tok, res, chats, max_new_tokens=12)[0].token_ids == adapter[0].token_ids
    w = next(p for n, p in merged.named_parameters() if n.endswith("q_proj.weight"))
    rounded = dict(ft.round_to_bf16(merged).named_parameters())[
        next(n for n, _ in merged.named_parameters() if n.endswith("q_proj.weight"))]
    assert torch.equal(rounded, w.to(torch.bfloat16).float())  # bf16 values, fp32 storage
    assert not torch.equal(rounded, w)  # and a copy: merged is untouched
    # In place (one model in memory, notebook 09 on Binder): same answers, same rounding.
    spent = copy.deepcopy(pm)
    folded = ft.merged(spent, copy_weights=False)
    assert ft.answers(folded, tok, res, chats, max_new_tokens=12)[0].token_ids == adapter[0].token_ids
    assert ft.round_to_bf16(folded, copy_weights=False) is folded
    q = next(p for n, p in folded.named_parameters() if n.endswith("q_proj.weight"))
    assert torch.equal(q, rounded)
    assert base[0].token_ids  # the base (adapter disabled) is reachable for the control row
    with pytest.raises(ChatlabError, match="adapter_config.json"):
        ft.load_adapter(smollm2[0], tmp_path)
