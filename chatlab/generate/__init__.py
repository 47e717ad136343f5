"""The generation loop: sampling, stop ids and strings, streaming text, over any backend."""
from chatlab.generate.logprobs import TokenLogprob, TopLogprob, chat_logprobs, completion_logprobs
from chatlab.generate.assemble import Event, Finished, IncrementalDetokenizer, StopMatcher, TextDelta
from chatlab.generate.loop import StopFn, generate, stop_ids_for
from chatlab.generate.sampling import SamplingParams, Sampler
from chatlab.generate.speculate import Speculation

__all__ = ["Event", "Finished", "IncrementalDetokenizer", "SamplingParams", "Sampler",
           "Speculation", "StopFn", "StopMatcher", "TextDelta", "TokenLogprob", "TopLogprob", "chat_logprobs",
           "completion_logprobs", "generate", "stop_ids_for"]
