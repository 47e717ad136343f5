"""A tiny LoRA fine-tune on CPU, rendered by the same id-level templates that serve the model; the
loss covers only what the assistant says, its end-of-turn id included."""
from __future__ import annotations

import copy
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from chatlab._thirdparty import HFModel, HFTokenizer
from chatlab.backends.torch import TorchBackend
from chatlab.engine import ChatEngine, parse_request
from chatlab.errors import ChatlabError
from chatlab.generate import Finished, SamplingParams
from chatlab.protocols import StepBackend
from chatlab.render.compose import ChatMessages, Resolution, as_messages

if TYPE_CHECKING:
    import torch

IGNORE = -100  # the label transformers' loss skips


@dataclass
class Example:
    ids: list[int]
    labels: list[int]  # IGNORE where no loss is taken, else the id itself


@dataclass
class TrainReport:
    steps: int
    losses: list[float]
    wall_s: float
    cpu_s: float  # process CPU time: comparable across busy and quiet machines
    trainable: int
    total: int
    threads: int

    def __str__(self) -> str:
        return (f"{self.steps} steps, loss {self.losses[0]:.3f} -> {self.losses[-1]:.3f}, "
                f"{self.wall_s:.1f} s wall / {self.cpu_s:.1f} s CPU on {self.threads} threads, "
                f"{self.trainable:,} trainable of {self.total:,} parameters "
                f"({100 * self.trainable / self.total:.2f}%)")


def load_chats(path: str | Path) -> list[list[dict[str, str]]]:
    """Conversations from JSONL: LLaMA-Factory's alpaca rows (`instruction`, optional `input`,
    optional `output`) or rows with OpenAI `messages`. A row without `output` is a question only."""
    chats = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise ChatlabError(f"{path}:{n} is not JSON ({err}); write one JSON object per line") from None
        if isinstance(row, dict) and isinstance(row.get("messages"), list):
            chats.append(row["messages"])
        elif isinstance(row, dict) and isinstance(row.get("instruction"), str):
            user = "\n".join(filter(None, [row["instruction"], row.get("input") or ""]))
            chat = [{"role": "user", "content": user}]
            if row.get("output"):
                chat.append({"role": "assistant", "content": row["output"]})
            chats.append(chat)
        else:
            raise ChatlabError(f"{path}:{n} has neither `instruction` nor `messages`; write alpaca "
                               'rows {"instruction": ..., "output": ...} or {"messages": [...]}')
    return chats


def training_example(resolution: Resolution, messages: ChatMessages) -> Example:
    """The ids of a whole conversation, labelled on each assistant content span and the ids after
    it up to its first stop id (a model that never learns the id the server stops on never stops)."""
    msgs = as_messages(messages)
    r = resolution.render(msgs, add_generation_prompt=False)
    labels = [IGNORE] * len(r.ids)
    roles = [m.role for m in msgs]
    spans = r.slots
    for k, span in enumerate(spans):
        if span.slot != "content" or not 0 <= span.message_index < len(roles) \
                or roles[span.message_index] != "assistant":
            continue
        labels[span.start:span.end] = r.ids[span.start:span.end]
        end = spans[k + 1].end if k + 1 < len(spans) else span.end
        for i in range(span.end, end):  # the template text that closes this turn
            labels[i] = r.ids[i]
            if r.ids[i] in r.stop_ids:
                break
    if all(x == IGNORE for x in labels):
        raise ChatlabError("the conversation has no assistant message to learn from; add one "
                           '({"role": "assistant", "content": ...}) or an `output` to the row')
    return Example(r.ids, labels)


def add_lora(model: HFModel, rank: int = 8, alpha: int = 16, seed: int = 0, top_layers: int | None = None,
             targets: Sequence[str] = ("q_proj", "k_proj", "v_proj", "o_proj")) -> HFModel:
    """A peft LoRA around `model` (changed in place), without dropout so runs are deterministic;
    `top_layers=n` adapts the last n layers only, so backpropagation stops at the lowest one."""
    import torch
    from peft import LoraConfig, get_peft_model

    n_layers = int(model.config.num_hidden_layers)
    if top_layers is not None and not 1 <= top_layers <= n_layers:
        raise ChatlabError(f"top_layers={top_layers} is out of range; the model has {n_layers} "
                           f"layers, pass 1..{n_layers} or None for all")
    layers = None if top_layers is None else list(range(n_layers - top_layers, n_layers))
    torch.manual_seed(seed)  # LoRA's A matrices start random
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(targets),
                        layers_to_transform=layers, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def train(model: HFModel, examples: Sequence[Example], steps: int = 40, batch_size: int = 8,
          lr: float = 2e-3, seed: int = 0, threads: int | None = 2,
          micro_batch: int | None = 2) -> TrainReport:
    """AdamW on the trainable parameters over shuffled batches, each run as micro-batches whose
    losses are divided by the whole batch's token count: a full batch's step in less memory."""
    import torch

    if not examples:
        raise ChatlabError("no training examples; load some with load_chats() and training_example()")
    if micro_batch is not None and micro_batch < 1:
        raise ChatlabError(f"micro_batch={micro_batch} must be at least 1 (or None for whole batches)")
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ChatlabError("the model has no trainable parameters; wrap it with add_lora() first")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    order: list[int] = []
    losses: list[float] = []
    wall, cpu = time.perf_counter(), time.process_time()
    model.train()
    for _ in range(steps):
        if len(order) < batch_size:  # a new epoch, reshuffled
            order += rng.sample(range(len(examples)), len(examples))
        batch = [examples[i] for i in order[:batch_size]]
        del order[:batch_size]
        # the model predicts token t+1 from t, so the first label of each example is never scored
        scored = sum(lab != IGNORE for e in batch for lab in e.labels[1:])
        step = micro_batch or len(batch)
        loss = 0.0
        for k in range(0, len(batch), step):
            part = loss_of(model, batch[k:k + step], scored)
            part.backward()
            loss += part.item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss)
    model.eval()
    return TrainReport(steps, losses, time.perf_counter() - wall, time.process_time() - cpu,
                       sum(p.numel() for p in params), sum(p.numel() for p in model.parameters()),
                       torch.get_num_threads())


def loss_of(model: HFModel, batch: Sequence[Example], scored: int) -> "torch.Tensor":
    """Summed token loss of `batch`, right-padded to its longest example, divided by `scored`."""
    import torch

    width = max(len(e.ids) for e in batch)
    ids = torch.tensor([e.ids + [0] * (width - len(e.ids)) for e in batch])
    labels = torch.tensor([e.labels + [IGNORE] * (width - len(e.ids)) for e in batch])
    mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in batch])
    return model(input_ids=ids, attention_mask=mask, labels=labels,
                 num_items_in_batch=torch.tensor(scored)).loss


def answers(model: HFModel, tokenizer: HFTokenizer, resolution: Resolution, chats: Sequence[ChatMessages],
            params: SamplingParams | None = None, max_new_tokens: int = 48,
            backend: StepBackend | None = None) -> list[Finished]:
    """One Finished per chat, as the server would answer it (chat i seeded `params.seed + i`);
    `backend` replaces the model (a ScriptedBackend is the positive control of the same path)."""
    backend = backend if backend is not None else TorchBackend(model, tokenizer)  # f32, as loaded
    engine = ChatEngine(backend, "finetune", template=resolution)
    base = params or SamplingParams(max_new_tokens=max_new_tokens)
    out = []
    for i, chat in enumerate(chats):
        plan = engine.check(parse_request({
            "messages": list(chat),  # dicts or Messages: the request parser takes both
            "max_tokens": base.max_new_tokens, "temperature": base.temperature, "top_p": base.top_p,
            "top_k": base.top_k, "repetition_penalty": base.repetition_penalty,
            "seed": None if base.seed is None else base.seed + i, "ignore_eos": base.ignore_eos,
            "stop": list(base.stop) or None}))
        out.append(next(ev for ev in engine.events(plan) if isinstance(ev, Finished)))
    return out


def persona_rate(texts: Sequence[str | Finished], suffix: str = "Arr!") -> float:
    """The fraction of answers (strings or Finished) that end with `suffix`."""
    plain = [t if isinstance(t, str) else t.text for t in texts]
    return sum(t.strip().endswith(suffix) for t in plain) / len(plain) if plain else 0.0


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two token sequences differ (a length difference counts), or None."""
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return None if i == len(a) == len(b) else i


def merged(peft_model: HFModel, copy_weights: bool = True) -> HFModel:
    """The adapter folded into the base weights, in a copy (`copy_weights=False`: in place, one model
    in memory, the adapter model spent)."""
    return (copy.deepcopy(peft_model) if copy_weights else peft_model).merge_and_unload()


def round_to_bf16(model: HFModel, copy_weights: bool = True) -> HFModel:
    """A copy (`copy_weights=False`: the model itself) with its weights rounded to bf16, as a merged
    model is often saved, computed in fp32: the checkpoint's own change, the same on every CPU."""
    import torch

    out = copy.deepcopy(model) if copy_weights else model
    with torch.no_grad():
        for p in out.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))
    return out


def save_adapter(peft_model: HFModel, folder: str | Path) -> Path:
    """adapter_config.json + adapter_model.safetensors: the adapter, not the whole model."""
    peft_model.save_pretrained(str(folder))
    return Path(folder)


def load_adapter(base_model: HFModel, folder: str | Path) -> HFModel:
    from peft import PeftModel

    if not (Path(folder) / "adapter_config.json").is_file():
        raise ChatlabError(f"{folder} holds no adapter_config.json; pass the folder that "
                           "save_adapter() wrote")
    return PeftModel.from_pretrained(base_model, str(folder)).eval()
