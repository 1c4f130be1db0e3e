"""One validation mechanism for every input file of the suite.

The schema of a file is a dataclass: its type annotations say what each key holds, optional
field metadata (``rule(...)``) adds bounds, choices and an example. :func:`from_dict` checks a
parsed mapping against it and builds the object; :func:`to_dict` is its inverse (load, save,
load gives the same object). :func:`read_data` reads a YAML/JSON file and names the file in
every error: a regular file only (pipes, devices, directories refused before opening), its size
capped before reading, UTF-8 (a byte-order mark dropped), no YAML aliases, no duplicate keys
(``inputspec.files``, ``inputspec.parse``). :func:`read_bytes` / :func:`read_text` are the
bounded reads for other formats (CSV, checkpoints), :func:`check_regular` the check alone.

Every refusal is an :class:`InputError` (a ``ValueError``, so the CLI prints one line and exits
2) whose message names the file, the field, the value, what is expected and a good value::

    jobs/my.yaml: pp: got 'h100'; expected an integer >= 1 (e.g. pp: 8)

This package depends on nothing of ours (only the standard library and PyYAML), so every
layer, ``topologies`` included, may import it. See ``docs/contributing.md`` ("Input files").
"""

from inputspec.core import check_value, from_dict, is_decimal, rule, to_dict
from inputspec.errors import MAX_MESSAGE_CHARS, InputError
from inputspec.files import MAX_FILE_BYTES, check_regular, read_bytes, read_text, write_text
from inputspec.parse import parse_text, read_data
from inputspec.resources import (
    ResourceError,
    available_memory_bytes,
    check_memory,
    check_time,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_MESSAGE_CHARS",
    "InputError",
    "ResourceError",
    "available_memory_bytes",
    "check_memory",
    "check_regular",
    "check_time",
    "check_value",
    "from_dict",
    "is_decimal",
    "parse_text",
    "read_bytes",
    "read_data",
    "read_text",
    "rule",
    "to_dict",
    "write_text",
]
