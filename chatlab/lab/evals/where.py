"""Which machine and day a stored number comes from, printed beside every timing table.

A timing means little without its machine: the notebooks' stored outputs are re-run on other
computers, so each table of seconds or tokens per second prints this line next to it.
"""
from __future__ import annotations

import datetime as dt

from chatlab.backends.precision import cpu_info


def measured_on(today: dt.date | None = None) -> str:
    """'2 cores, <CPU model>, YYYY-MM-DD': the cores this process may use, the CPU, the date (UTC)."""
    info = cpu_info()
    day = today or dt.datetime.now(dt.timezone.utc).date()
    cores = info["threads"]
    return f"{cores} core{'s' if cores != 1 else ''}, {info['model']}, {day.isoformat()}"
