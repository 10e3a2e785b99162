"""Run ids: sortable, readable, and unique enough for one machine (``20261121-224501-3fa2``).

Made by the controlling pytest process, or by the server for a run it starts (`run_tests`), which
passes it in ``MCPDEBUG_RUN_ID`` so it can follow the run from its first event.
"""

from __future__ import annotations

import os
import time


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(2).hex() + f"{os.getpid() % 256:02x}"
