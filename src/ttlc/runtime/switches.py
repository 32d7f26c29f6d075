"""Environment variables that turn a feature off (docs/api.md, "Environment variables"):
the disk cache, autotuning, launch-time specialisation."""
from __future__ import annotations

import os

#: the values that turn a feature off, in any case and surrounded by blanks
OFF = ("0", "no", "off", "false")


def on(variable: str) -> bool:
    """Whether `variable` leaves its feature on: unset, or anything but OFF."""
    return os.environ.get(variable, "1").strip().lower() not in OFF
