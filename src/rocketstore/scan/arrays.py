"""Arrow arrays from numpy arrays and Python lists, and numpy views of Arrow arrays, by their buffers.

`pa.array`, `pa.scalar`, `pa.repeat` and `Array.to_numpy` import pandas on their first call in a process
when it is installed (pyarrow asks whether the input is a pandas object): a quarter of a second, on a
read that may take less. The columnar reads build and look at arrays only through these helpers, and
import no pandas (`tests/unit/test_arrow_no_pandas.py` runs reads in a fresh process to hold it).
The row path (`records.to_record_batch`, for records the columnar kernels leave to it) still goes
through `pa.array`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["FALSE", "NULL_BOOL", "bools", "from_numpy", "from_values", "numpy_view", "scalar"]


def from_numpy(array: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """The Arrow array of a one-dimensional numpy array of integers or booleans (a copy of booleans,
    which Arrow packs in bits; integers shared when contiguous), null where `valid` is False."""
    array = np.ascontiguousarray(array).reshape(-1)
    n = len(array)
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if array.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), n, [bitmap, pa.py_buffer(np.packbits(array, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(array.dtype), n, [bitmap, pa.py_buffer(array)])


def from_values(items: Sequence[str | bytes | int], kind: pa.DataType) -> pa.Array:
    """The Arrow array of `kind` (a string, binary or integer type) holding `items` (no None)."""
    if pa.types.is_integer(kind):
        return from_numpy(np.array(items, dtype=kind.to_pandas_dtype()))
    if not (pa.types.is_string(kind) or pa.types.is_binary(kind)):
        raise TypeError(f"from_values: no array of {kind} from values")
    data: list[bytes] = []
    for x in items:
        if isinstance(x, int):
            raise TypeError(f"from_values: {kind} values must be str or bytes, not {x!r}")
        data.append(x.encode() if isinstance(x, str) else x)
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(x) for x in data], out=offsets[1:])
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def scalar(item: str | bytes | int, kind: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of `kind` (as `from_values` takes) holding `item`."""
    return from_values([item], kind)[0]


FALSE: pa.Scalar = from_numpy(np.zeros(1, dtype=bool))[0]
NULL_BOOL: pa.Scalar = from_numpy(np.zeros(1, dtype=bool), valid=np.zeros(1, dtype=bool))[0]


def numpy_view(array: pa.Array) -> np.ndarray:
    """The values of an integer array as a numpy view of its buffer (what a null holds is not defined:
    callers read arrays without nulls)."""
    kind = np.dtype(array.type.to_pandas_dtype())  # numpy's type of it, pandas not involved
    return np.frombuffer(array.buffers()[1], dtype=kind, count=len(array), offset=array.offset * kind.itemsize)


def bools(array: pa.Array) -> np.ndarray:
    """A boolean array as numpy booleans, a null as False."""
    n = len(array)
    _, data = array.buffers()[:2]
    got = np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=array.offset + n,
                        bitorder="little")[array.offset:].astype(bool)
    if array.null_count:
        validity = array.buffers()[0]
        got &= np.unpackbits(np.frombuffer(validity, dtype=np.uint8), count=array.offset + n,
                             bitorder="little")[array.offset:].astype(bool)
    return got
