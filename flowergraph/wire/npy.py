"""Flower's ``Array`` (a numpy array as ``.npy`` bytes) to numpy and back, with the ``.npy`` header parsed or
written once per (dtype, shape) instead of once per array.

``Array.numpy()`` is ``numpy.load`` on the bytes, which parses every header with ``ast.literal_eval``;
``Array(ndarray)`` is ``numpy.save``, which formats one. A client message carries a few small arrays in and out,
and FedStar's ``context.state`` a model and its Adam moments (~60 arrays) both ways: at 1,000 fedavg clients the
headers were ~0.5 ms of a ~8 ms message, and ~20 % of a FedStar client's. The arrays' shapes repeat from message to
message, so :func:`to_numpy` keeps numpy's own reading of each distinct header (``numpy.lib.format``) and copies
the data out with ``numpy.frombuffer``; :func:`from_numpy` writes the bytes ``numpy.save`` writes (its own
header, memoised, and the array's bytes in C order). Anything else - another serialisation type, a Fortran-order or
object array, a header ``numpy.save`` would write in format 2.0, bytes of an unexpected length - takes Flower's own
path, which decides as it always did (errors included)."""

from __future__ import annotations

import functools
import io
import math

import numpy as np
from flwr.app import Array

_MAGIC = b"\x93NUMPY\x01\x00"  # format 1.0: what numpy.save writes for any header under 64 KiB
_NUMPY = "numpy.ndarray"  # Flower's SType.NUMPY


@functools.lru_cache(maxsize=4096)
def _read_header(header: bytes) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of a C-order, non-object ``.npy`` 1.0 header (``header``: its length field and text), as
    numpy reads it; None for any other."""
    from ..storage._astlock import serialize_ast_parse

    serialize_ast_parse()
    try:
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(io.BytesIO(header))
    except ValueError:
        return None
    if fortran_order or dtype.hasobject or dtype.itemsize == 0:
        return None
    return dtype, tuple(int(n) for n in shape)


def to_numpy(array: Array) -> np.ndarray:
    """``array.numpy()``: a new, writable numpy array (see the module docstring)."""
    data = array.data
    if array.stype == _NUMPY and isinstance(data, bytes) and data[:8] == _MAGIC and len(data) >= 10:
        end = 10 + int.from_bytes(data[8:10], "little")
        parsed = _read_header(data[8:end])
        if parsed is not None:
            dtype, shape = parsed
            count = math.prod(shape)
            if len(data) - end == count * dtype.itemsize:
                return np.frombuffer(data, dtype=dtype, count=count, offset=end).reshape(shape).copy()
    from ..storage._astlock import serialize_ast_parse

    serialize_ast_parse()
    return array.numpy()


@functools.lru_cache(maxsize=4096)
def _header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes | None:
    """The magic string and header ``numpy.save`` writes for a C-contiguous array of ``dtype`` and ``shape`` (None
    where it would not use format 1.0)."""
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    try:
        np.lib.format.write_array_header_1_0(buffer, header)
    except ValueError:
        return None
    return buffer.getvalue()


def from_numpy(values: np.ndarray) -> Array:
    """``Array(values)``: the same dtype, shape, serialisation type and bytes (see the module docstring)."""
    if (
        type(values) is np.ndarray
        and values.flags.c_contiguous
        and values.dtype.kind in "biufc"  # plain numbers and booleans (no structured, object or string dtype)
        and values.dtype.itemsize > 0
    ):
        header = _header(values.dtype, tuple(values.shape))
        if header is not None:
            return Array(
                dtype=str(values.dtype), shape=tuple(values.shape), stype=_NUMPY, data=header + values.tobytes()
            )
    return Array(values)
