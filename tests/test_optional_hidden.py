"""CHATLAB_HIDE_OPTIONAL makes an installed optional asset read as not installed, so the
notebooks' "not installed" column (what a learner without the asset sees) runs on a machine
that has it. Required assets are never hidden."""
from __future__ import annotations

import pytest

from chatlab.errors import AssetError
from chatlab.lab.evals.controls import OPTIONAL_MODEL, optional_model
from chatlab.models.assets import HIDE_OPTIONAL, get_asset
from chatlab.models.store import asset_path, is_available


def test_hiding_the_optional_model_makes_its_column_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    qwen, smol = get_asset(OPTIONAL_MODEL), get_asset("smollm2-135m-instruct")
    assert qwen.optional and not smol.optional
    monkeypatch.setenv(HIDE_OPTIONAL, "1")
    assert qwen.hidden and qwen.source_files() is None and not is_available(qwen)
    assert optional_model() == (None, "not installed")
    assert smol.source_files() is not None and not smol.hidden  # the required model stays
    with pytest.raises(AssetError, match=f"hidden here by {HIDE_OPTIONAL}=1.*unset {HIDE_OPTIONAL}"):
        asset_path(qwen)
    # notebooks 07 and 08 write the reason optional_model() gives in their column,
    # 04 when source_files() is None; controls_table's test checks how such a column renders


@pytest.mark.parametrize("value", ["", "0", "no", "false"])
def test_other_values_hide_nothing(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(HIDE_OPTIONAL, value)
    assert not get_asset(OPTIONAL_MODEL).hidden
