"""Stop strings with prefix-aware holdback, over every way of chunking the stream."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from chatlab.generate.assemble import StopMatcher

STOPS = ["\nObservation:", "<|im_end|>", "###"]


def run(chunks: list[str], stops: list[str] = STOPS) -> tuple[list[str], str | None, str]:
    m = StopMatcher(stops)
    shown: list[str] = []
    for c in chunks:
        r = m.feed(c)
        shown.append(r.text)
        if r.stop is not None:
            return shown, r.stop, ""
    return shown, None, m.flush()


def test_stop_split_across_tokens_is_caught_and_never_shown():
    shown, stop, _ = run(["Action: search", "\nObs", "erv", "ation:", " result"])
    assert stop == "\nObservation:"
    assert "".join(shown) == "Action: search"
    assert shown[1:] == ["", "", ""]  # "\nObs" and "erv" were held, then dropped


def test_held_text_is_released_as_soon_as_it_cannot_be_a_stop():
    shown, stop, _ = run(["a\nObs", "idian rock"])
    assert stop is None
    assert shown == ["a", "\nObsidian rock"]


def test_flush_releases_a_dangling_prefix_at_the_end():
    shown, stop, rest = run(["total ##"])
    assert stop is None and shown == ["total "] and rest == "##"


def test_earliest_stop_wins_and_longest_at_same_place():
    m = StopMatcher(["\n", "\nObservation:", "END"])
    assert m.feed("x END y\nObservation:").text == "x "
    m = StopMatcher(["\n", "\nObservation:"])
    r = m.feed("x\nObservation: y")
    assert (r.text, r.stop) == ("x", "\nObservation:")


def test_no_stops_passes_text_through():
    assert StopMatcher([]).feed("###").text == "###"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "#", "##", "\n", "Obs", "ervation:", "<|im_", "end|>", " x"]),
                max_size=12),
       st.data())
def test_any_chunking_equals_cutting_the_whole_text(pieces, data):
    text = "".join(pieces)
    # Cut the text into random chunks, independently of how it was built.
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=6)))
    chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)]) if i < j]
    shown, stop, rest = run(chunks)
    hits = [(text.find(s), s) for s in STOPS if s in text]
    if hits:
        at, _ = min(hits)
        assert stop is not None and "".join(shown) == text[:at]
    else:
        assert stop is None and "".join(shown) + rest == text
    for s in STOPS:  # the user never sees a stop string, even partially accumulated
        assert s not in "".join(shown)
    # Holdback is minimal: whatever is held back is a proper prefix of some stop string.
    assert rest == "" or any(s.startswith(rest) and s != rest for s in STOPS)
