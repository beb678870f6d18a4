"""What the fuzz driver and its target modules share: edge values, the disagreement error, and
outcomes comparable across a C function and its twin. Imports nothing of the store."""

from __future__ import annotations

INT64_EDGES = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63 - 8, 2**63 - 40, -2**63,
               -2**63 + 1]
OUT_OF_RANGE = [2**63, -2**63 - 1, 2**64, 2**100]
POSITION_EDGES = INT64_EDGES + [-2, -8]


class Disagreement(Exception):
    """The C kernel and its twin answered differently."""


def outcome(function, *args):
    """("ok", value) or ("raise", exception type name, message): comparable across twins."""
    try:
        return ("ok", function(*args))
    except Exception as error:                   # whatever either twin raises is compared
        return ("raise", type(error).__name__, str(error))
