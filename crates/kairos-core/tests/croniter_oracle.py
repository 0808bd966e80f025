#!/usr/bin/env python3
"""The other side of crates/kairos-core/tests/croniter_diff/: fire times from croniter.

Reads one JSON batch on stdin:

    {"count": 20, "cases": [{"expr": "0 0 * * WED", "zone": "Europe/Berlin",
                             "start": "2025-03-30T00:30:00Z", "seconds_first": false}, ...]}

and writes one JSON object on stdout, the results in the order of the cases:

    {"croniter": "7.0.0", "results": [{"times": ["2025-04-01T22:00:00Z", ...]},
                                      {"error": "CroniterBadCronError: ..."}, ...]}

Each case starts croniter at `start` as an aware datetime in `zone` (zoneinfo), so croniter
reads the expression on that zone's wall clock and applies its own DST handling; times are
returned in UTC, whole seconds. A 6-field expression is seconds first
(`second_at_beginning=True`). A case croniter refuses, or runs out on, reports the error
instead of times. The cases are spread over every core (they are independent).

Exit status 3, with a message on stderr, when croniter is not installed.
"""

import json
import multiprocessing
import os
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

try:
    import importlib.metadata

    from croniter import croniter
except ImportError:
    sys.stderr.write(
        "croniter is not installed: python3 -m pip install -r scripts/cron-diff.requirements.txt\n"
    )
    sys.exit(3)

COUNT = 20


def fire_times(case):
    """croniter's first COUNT fire times after the case's start, or the error it raised."""
    try:
        zone = ZoneInfo(case["zone"])
        start = datetime.fromisoformat(case["start"].replace("Z", "+00:00")).astimezone(zone)
        it = croniter(case["expr"], start, second_at_beginning=case["seconds_first"])
        times = []
        for _ in range(COUNT):
            fire = it.get_next(datetime)
            times.append(fire.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return {"times": times}
    except Exception as err:  # croniter's refusals and its "no next date" alike
        return {"error": f"{type(err).__name__}: {err}"}


def init(count):
    global COUNT
    COUNT = count


def main():
    batch = json.load(sys.stdin)
    count = int(batch["count"])
    cases = batch["cases"]
    workers = max(1, min(os.cpu_count() or 1, len(cases) // 200 or 1))
    if workers == 1:
        init(count)
        results = [fire_times(case) for case in cases]
    else:
        with multiprocessing.Pool(workers, initializer=init, initargs=(count,)) as pool:
            results = pool.map(fire_times, cases, chunksize=64)
    json.dump({"croniter": importlib.metadata.version("croniter"), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
