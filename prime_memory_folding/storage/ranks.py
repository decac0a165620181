"""Record ids in sorted order, fast: what breaks every tie in a fold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

#: Hexadecimal digits in a record id: its 128-bit address.
_ID_DIGITS = 32
#: Each byte's value as a lower-case hexadecimal digit; 16 for any other byte.
_HEX_VALUE = np.full(256, 16, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def id_order(record_ids: Sequence[str]) -> npt.NDArray[np.int64]:
    """The positions of ``record_ids`` in sorted (string) order, ties in the order given.

    Record ids are addresses written as 32 lower-case hexadecimal digits, so
    their string order is the order of the two 64-bit numbers they spell:
    those sort several times faster than strings. Any other id sorts as a string.
    """
    n = len(record_ids)
    joined = "".join(record_ids)
    if n and len(joined) == n * _ID_DIGITS and joined.isascii():
        digits = _HEX_VALUE[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]
        if digits.max() < 16 and all(len(rid) == _ID_DIGITS for rid in record_ids):
            digits = digits.reshape(n, _ID_DIGITS)
            packed = (digits[:, 0::2] << np.uint8(4)) | digits[:, 1::2]
            halves = packed.view(">u8").astype(np.uint64)
            order: npt.NDArray[np.int64] = np.lexsort((halves[:, 1], halves[:, 0]))
            return order
    keys = np.array(record_ids) if n else np.zeros(0, dtype="U1")
    order = np.argsort(keys, kind="stable")
    return order
