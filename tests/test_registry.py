"""The backend registry and the engine's token sources, without loading a model: the CLI's
flags come from the registry, the registry picks the token source, and the engine drains
either source through the same plan and parser."""
from __future__ import annotations

import dataclasses
import queue
from typing import Any

import pytest

from chatlab.backends import registry
from chatlab.backends.registry import REGISTRY, BackendSpec, check_choice, load_step_backend
from chatlab.cli.args import options_from_args
from chatlab.cli import build_parser
from chatlab.engine import ChatEngine, load_engine, parse_request
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.lab.evals.controls import ScriptedBackend
from chatlab.protocols import BatchedBackend, StepBackend

REPLY = "Paris is the capital of France."
ASK = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0}


def chatml_tokenizer() -> Any:
    from chatlab.render import get_template
    from chatlab.render.io.jinja_writer import tokenizer_for

    return tokenizer_for(get_template("chatml"))


class ScriptedStream:
    """A batched request that streams its reply's ids in two scheduler steps, then ends."""

    def __init__(self, ids: list[int]) -> None:
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        half = max(1, len(ids) // 2)
        for part in (ids[:half], ids[half:]):
            if part:
                self.items.put(part)
        self.items.put(None)
        self.status: str | None = "FINISHED"
        self.cancelled = False

    def get(self, timeout: float) -> list[int] | BaseException | None:
        return self.items.get(timeout=timeout)

    def cancel(self) -> None:
        self.cancelled = True


class ScriptedBatched:
    """A batched backend (submit/close, no prefill/step) replaying one reply per request."""

    name, precision, threads, max_seqs = "scripted-batched", "f32", None, 2

    def __init__(self, tokenizer: Any, reply: str) -> None:
        self.tokenizer = self.decoder = tokenizer
        self.vocab_size, self.context_length = len(tokenizer), 4096
        self.eos_ids = [int(tokenizer.eos_token_id)]
        self.reply = list(tokenizer.encode(reply, add_special_tokens=False))
        self.submitted: list[list[int]] = []

    def submit(self, ids: list[int], config: Any) -> ScriptedStream:
        self.submitted.append(list(ids))
        return ScriptedStream(self.reply)

    def close(self) -> None:
        pass


@pytest.fixture()
def scripted_specs(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two registry entries, one per token source, whose loaders record what they were given."""
    seen: dict[str, Any] = {}

    def loop_loader(model: str, weight_format: str, precision: str, **options: Any) -> ScriptedBackend:
        seen["loop"] = (model, weight_format, precision, options)
        return ScriptedBackend(chatml_tokenizer(), [REPLY])

    def batched_loader(model: str, weight_format: str, precision: str, **options: Any) -> ScriptedBatched:
        seen["batched"] = (model, weight_format, precision, options)
        return ScriptedBatched(chatml_tokenizer(), REPLY)

    monkeypatch.setitem(REGISTRY, "scripted", BackendSpec("scripted", "a script", "loop", ("fp32",), "fp32",
                                                          loop_loader, (registry.THREADS,)))
    monkeypatch.setitem(REGISTRY, "scripted-batched", BackendSpec(
        "scripted-batched", "a batched script", "batched", ("int8",), "int8", batched_loader,
        (registry.Option("max_seqs", int, 8, "sequences at once"),)))
    return seen


def test_every_backend_has_a_source_formats_and_a_default() -> None:
    assert list(REGISTRY)[:3] == ["torch", "openvino", "genai"]
    assert {n: s.source for n, s in REGISTRY.items()} == {"torch": "loop", "openvino": "loop", "genai": "batched"}
    for spec in REGISTRY.values():
        assert spec.default_weight_format in spec.weight_formats


def test_cli_flags_come_from_the_registry() -> None:
    parser = build_parser()
    args = parser.parse_args(["complete", "--messages", "m.json", "--attention", "sdpa", "--threads", "2"])
    assert options_from_args(args) == {"attention": "sdpa", "threads": 2}
    args = parser.parse_args(["serve", "--backend", "genai", "--max-seqs", "3"])
    assert options_from_args(args) == {"max_seqs": 3}


def test_a_flag_of_another_backend_is_refused_by_name() -> None:
    args = build_parser().parse_args(["serve", "--max-seqs", "3"])  # default backend: openvino
    with pytest.raises(ChatlabError, match=r"--max-seqs does not apply to --backend openvino.*--attention"):
        options_from_args(args)


def test_bad_names_and_values_are_refused_before_loading() -> None:
    with pytest.raises(UnknownNameError, match="valid choices: paged, sdpa"):
        check_choice("openvino", None, {"attention": "flash"})
    with pytest.raises(UnknownNameError, match="fp32"):
        check_choice("torch", "int4", {})
    with pytest.raises(ChatlabError, match="takes no option max_seqs"):
        check_choice("torch", None, {"max_seqs": 2})
    with pytest.raises(ChatlabError, match="no prefill/step"):
        load_step_backend("smollm2-135m-instruct", "genai")


def test_the_registry_picks_the_token_source(scripted_specs: dict[str, Any]) -> None:
    loop = load_engine("m", "scripted", threads=1)
    batched = load_engine("m", "scripted-batched", max_seqs=2)
    assert type(loop) is ChatEngine and type(batched) is ChatEngine
    assert scripted_specs["loop"] == ("m", "fp32", "f32", {"threads": 1})
    assert scripted_specs["batched"] == ("m", "int8", "f32", {"max_seqs": 2})
    assert loop.max_concurrency == 1 and batched.max_concurrency == 2
    assert isinstance(loop.backend, StepBackend) and not isinstance(batched.backend, StepBackend)
    assert isinstance(batched.backend, BatchedBackend)
    # the same plan and parser on both: the same answer, from the same prompt ids
    a, b = loop.chat(loop.check(parse_request(ASK))), batched.chat(batched.check(parse_request(ASK)))
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"] == REPLY
    assert batched.backend.submitted == [list(loop.check(parse_request(ASK)).prompt_ids)]


def test_the_cli_passes_registry_flags_to_the_loader(scripted_specs: dict[str, Any]) -> None:
    from chatlab.cli.serve import engine_options

    args = build_parser().parse_args(["complete", "--messages", "m.json", "--backend", "scripted",
                                      "--threads", "3"])
    args.model = "m"
    load_engine(**engine_options(args))
    assert scripted_specs["loop"] == ("m", "fp32", "f32", {"threads": 3})


def test_the_engine_picks_its_source_from_the_backend() -> None:
    from chatlab.engine.batched import GenaiSource
    from chatlab.engine.engine import LoopSource
    from chatlab.generate import Speculation

    assert isinstance(ChatEngine(ScriptedBatched(chatml_tokenizer(), REPLY), "m").source, GenaiSource)
    assert isinstance(ChatEngine(ScriptedBackend(chatml_tokenizer(), [REPLY]), "m").source, LoopSource)
    with pytest.raises(ChatlabError, match="no prefill/step for chatlab's loop"):
        ChatEngine(object(), "m")  # type: ignore[arg-type]
    # speculation and prefix reuse are the loop's: refused on a batched backend, by its name
    for kw in ({"speculate": Speculation()}, {"reuse_prefix": True}):
        with pytest.raises(ChatlabError, match="drive chatlab's own loop; the scripted-batched backend"):
            ChatEngine(ScriptedBatched(chatml_tokenizer(), REPLY), "m", **kw)  # type: ignore[arg-type]


def test_load_engine_refuses_the_loops_speedups_on_a_batched_backend_before_loading(
        scripted_specs: dict[str, Any]) -> None:
    from chatlab.generate import Speculation

    with pytest.raises(ChatlabError, match="drive chatlab's own loop; the scripted-batched backend"):
        load_engine("m", "scripted-batched", speculate=Speculation())
    assert "batched" not in scripted_specs  # nothing was loaded


def test_the_openvino_attention_option_is_the_loaders(monkeypatch: pytest.MonkeyPatch) -> None:
    """--attention reaches OpenVINO's loader (recorded, not run: no export here)."""
    seen: dict[str, Any] = {}

    def record(model: str, weight_format: str, precision: str, **options: Any) -> ScriptedBackend:
        seen.update(options, weight_format=weight_format)
        return ScriptedBackend(chatml_tokenizer(), [REPLY])

    monkeypatch.setitem(REGISTRY, "openvino", dataclasses.replace(REGISTRY["openvino"], loader=record))
    load_engine("m", "openvino", attention="sdpa")
    assert seen == {"attention": "sdpa", "weight_format": "int8"}


def test_an_on_off_flag_names_its_two_values(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--dynamic-quantization", "on", "--backend", "openvino"])
    assert options_from_args(args) == {"dynamic_quantization": True}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--dynamic-quantization", "maybe"])
    assert "argument --dynamic-quantization: 'maybe': use on or off" in capsys.readouterr().err
    with pytest.raises(ValueError, match="use on or off"):
        registry.on_off("yes")
