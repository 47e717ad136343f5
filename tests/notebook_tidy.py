"""What `./run.sh store` does to a notebook after executing it, and what the output tests read.

Run as `python tests/notebook_tidy.py NOTEBOOK`: exercise solutions (cells tagged `solution`)
lose their outputs, which would show the answer; a cell's consecutive stream outputs are merged
(this nbconvert has no coalesce_streams option); and the file's widget state is cut to the
widgets a stored output still shows, since a progress bar drawn in a cleared cell would
otherwise stay in the metadata."""
from __future__ import annotations

import json
import re
import sys

import nbformat

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_state(nb: nbformat.NotebookNode) -> dict:
    return nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def shown_widgets(nb: nbformat.NotebookNode) -> set[str]:
    """Ids of the widget models a stored output shows, and of every model those reference."""
    state = widget_state(nb)
    todo = [out.data[WIDGET_VIEW]["model_id"] for cell in nb.cells
            for out in cell.get("outputs", []) if WIDGET_VIEW in out.get("data", {})]
    reached: set[str] = set()
    while todo:
        model = todo.pop()
        if model in state and model not in reached:
            reached.add(model)
            todo += re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state[model]))
    return reached


def tidy(path: str) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "solution" in cell.metadata.get("tags", []):
            cell.outputs, cell.execution_count = [], None
        merged: list[nbformat.NotebookNode] = []
        for out in cell.outputs:
            if merged and out.output_type == "stream" == merged[-1].output_type and merged[-1].name == out.name:
                merged[-1].text += out.text
            else:
                merged.append(out)
        cell.outputs = merged
    state = widget_state(nb)
    if state:
        keep = shown_widgets(nb)
        if keep:
            nb.metadata["widgets"][WIDGET_STATE]["state"] = {k: v for k, v in state.items() if k in keep}
        else:
            del nb.metadata["widgets"]
    nbformat.write(nb, path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        tidy(name)
