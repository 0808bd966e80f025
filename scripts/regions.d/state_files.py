"""The test bed's JSON state files (state, links, control, applied), shared by the bed's
verbs and the delay proxy: read whole, written whole through a rename so a reader never sees
half a file."""

import json
import os


def read_json(path, default=None):
    """The file's value; `default` when it is missing or not JSON (yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, value):
    """Writes `value` to `path` at once (a temporary file renamed over it)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)
