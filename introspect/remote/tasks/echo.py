"""Remote task "echo", for the transport tests: the request back, output padding, a sleep.

Standard library only, Python 3.8+. ``pad`` bytes go to both streams (the stream
plumbing must drain them concurrently); ``sleep`` seconds test deadlines; the pid
and process group test that nothing outlives the run.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict

from ..contract import EchoReply


def run(request: Dict[str, Any]) -> EchoReply:
    pad = int(request.get("pad", 0))
    if pad:
        sys.stderr.write("e" * pad)
        sys.stderr.flush()
    if request.get("sleep"):
        time.sleep(float(request["sleep"]))
    return EchoReply(request=request, pad="x" * pad, pid=os.getpid(), pgid=os.getpgid(0))
