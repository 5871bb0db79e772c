"""Peak RSS for the benchmarks that measure memory (`parallel.py`, `mapreduce.py`)."""

from __future__ import annotations

import resource


def peak_rss_kb() -> int:
    """This process's peak RSS in KB: Linux's ``VmHWM``, the high-water mark of the process's
    own memory. (``ru_maxrss`` would not do in a child: Linux carries the parent's peak over
    into it across ``exec``, so a child started after a large case began at that case's.)"""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
