"""One validation mechanism for every input file of the suite.

The schema of a file is a dataclass: its type annotations say what each key holds, optional
field metadata (``rule(...)``) adds bounds, choices and an example. :func:`from_dict` checks a
parsed mapping against it and builds the object; :func:`to_dict` is its inverse (load, save,
load gives the same object). :func:`read_data` reads a YAML/JSON file (UTF-8, size-capped,
NaN/Infinity refused in JSON) and names the file in every error.

Every refusal is an :class:`InputError` (a ``ValueError``, so the CLI prints one line and exits
2) whose message names the file, the field, the value, what is expected and a good value::

    jobs/my.yaml: pp: got 'h100'; expected an integer >= 1 (e.g. pp: 8)

This package depends on nothing of ours (only the standard library and PyYAML), so every
layer, ``topologies`` included, may import it. See ``docs/contributing.md`` ("Input files").
"""

from inputspec.core import (
    InputError,
    check_value,
    from_dict,
    read_data,
    read_text,
    rule,
    to_dict,
)
from inputspec.resources import (
    ResourceError,
    available_memory_bytes,
    check_memory,
    check_time,
)

__all__ = [
    "InputError",
    "ResourceError",
    "available_memory_bytes",
    "check_memory",
    "check_time",
    "check_value",
    "from_dict",
    "read_data",
    "read_text",
    "rule",
    "to_dict",
]
