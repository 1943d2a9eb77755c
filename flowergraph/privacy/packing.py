"""Row-matrix encodings for the wire (Flower-free): dense float32 or CSR, whichever is smaller.

Bag-of-words features (Cora, CiteSeer) give neighbour-aggregation rows that are ~98% zeros; sending them as
CSR (int64 indptr, int32 column indices, float32 values) is ~10x smaller than dense. Dense features (the
synthetic graph) stay dense. The receiver gets the encoding name with the arrays.
"""

from __future__ import annotations

import numpy as np

ENCODINGS = ("dense", "csr")


def encoded_size(values: np.ndarray) -> dict[str, int]:
    m, w = values.shape
    nnz = int(np.count_nonzero(values))
    return {"dense": m * w * 4, "csr": (m + 1) * 8 + nnz * (4 + 4)}


def encode_rows(values: np.ndarray, encoding: str | None = None) -> tuple[list[np.ndarray], str]:
    """Encode a [m, w] float matrix; ``encoding=None`` picks the smaller of dense and CSR."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    if values.ndim != 2:
        raise ValueError(f"expected a 2-d row matrix, got shape {values.shape}")
    if encoding is None:
        sizes = encoded_size(values)
        encoding = min(sizes, key=sizes.get)
    if encoding == "dense":
        return [values], "dense"
    if encoding == "csr":
        rows, cols = np.nonzero(values)
        indptr = np.zeros(values.shape[0] + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        return [np.cumsum(indptr), cols.astype(np.int32), values[rows, cols]], "csr"
    raise ValueError(f"unknown encoding {encoding!r}; valid choices: {', '.join(ENCODINGS)}")


def decode_rows(arrays: list[np.ndarray], encoding: str, num_rows: int, width: int) -> np.ndarray:
    """Inverse of :func:`encode_rows`; raises ValueError when the arrays do not fit (num_rows, width)."""
    if encoding == "dense":
        (values,) = arrays
        if values.shape != (num_rows, width):
            raise ValueError(f"dense rows of shape {values.shape}, expected {(num_rows, width)}")
        return np.asarray(values, dtype=np.float32)
    if encoding == "csr":
        indptr, cols, data = arrays
        if indptr.shape != (num_rows + 1,) or cols.shape != data.shape or int(indptr[-1]) != len(data):
            raise ValueError("malformed CSR rows (indptr/indices/data do not agree)")
        if len(cols) and (cols.min() < 0 or cols.max() >= width):
            raise ValueError(f"CSR column index out of range [0, {width})")
        out = np.zeros((num_rows, width), dtype=np.float32)
        rows = np.repeat(np.arange(num_rows), np.diff(indptr))
        out[rows, cols] = data
        return out
    raise ValueError(f"unknown encoding {encoding!r}; valid choices: {', '.join(ENCODINGS)}")


def pack_blobs(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Many byte strings as two arrays (lengths int64, concatenated uint8) for one array payload."""
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    blob = np.frombuffer(b"".join(blobs), dtype=np.uint8) if blobs else np.zeros(0, np.uint8)
    return lengths, blob


def unpack_blobs(lengths: np.ndarray, blob: np.ndarray) -> list[bytes]:
    if int(np.sum(lengths)) != blob.size or (lengths < 0).any():
        raise ValueError(f"blob of {blob.size} bytes does not match its {len(lengths)} lengths")
    raw = blob.tobytes()
    out, pos = [], 0
    for n in lengths.tolist():
        out.append(raw[pos : pos + n])
        pos += n
    return out
