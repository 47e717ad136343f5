"""The PyTorch backend's bf16: refused on a CPU without bf16 instructions unless the caller asks
for emulation (notebook 05 shows bf16's drift that way); then the weights really are bf16."""
from __future__ import annotations

import pytest

from chatlab.errors import ChatlabError


def tiny_model():  # a 2-layer Llama with random weights: the backend, not a language, is tested
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def test_bf16_is_refused_without_cpu_support_unless_emulated(fake_cpu) -> None:  # noqa: ANN001
    import torch

    from chatlab.backends.torch import TorchBackend

    fake_cpu(bf16=False)
    with pytest.raises(ChatlabError, match="avx512_bf16"):
        TorchBackend(tiny_model(), tokenizer=None, precision="bf16")
    backend = TorchBackend(tiny_model(), tokenizer=None, precision="bfloat16", emulate_bf16=True)
    assert backend.precision == "bf16"
    assert {p.dtype for p in backend.model.parameters()} == {torch.bfloat16}
    row = backend.prefill([1, 2, 3])
    assert row.dtype.name == "float32" and row.shape == (64,)  # the loop always gets f32 logits
    f32 = TorchBackend(tiny_model(), tokenizer=None)
    diff = abs(f32.prefill([1, 2, 3]) - row).max()
    assert 0 < diff < 0.1  # bf16 rounding moves the logits a little, not nothing, not wildly


def test_facts_come_from_the_model_its_eos_else_the_tokenizers() -> None:
    """Without a folder the backend reads the model's own config: its window, the generation
    config's eos (an int or a list), and the tokenizer's eos when the model names none."""
    from types import SimpleNamespace

    from chatlab.backends.torch import TorchBackend

    model = tiny_model()
    model.generation_config.eos_token_id = [5, 7]
    backend = TorchBackend(model, tokenizer=None)
    assert (backend.context_length, backend.vocab_size, backend.eos_ids) == (64, 64, [5, 7])
    model.generation_config.eos_token_id = None
    assert TorchBackend(model, tokenizer=SimpleNamespace(eos_token_id=3)).eos_ids == [3]
    assert TorchBackend(model, tokenizer=None).eos_ids == []
