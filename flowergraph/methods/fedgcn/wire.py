"""FedGCN's communication phase on the wire: the message kinds and one typed message per step, encoded and decoded
here for both sides (:class:`flowergraph.methods.fedgcn.server.FedGCNStrategy`,
:class:`flowergraph.methods.fedgcn.client.FedGCNClient`). The protocol and what each party learns are in
:mod:`flowergraph.methods.fedgcn.server`. ``w`` is the contribution width (feature dimension + 1); rows are CSR or
dense float32 as :func:`flowergraph.privacy.packing.encode_rows` chooses (``encoding``).

Plaintext: :data:`UPLOAD` (:class:`UploadRequest` -> :class:`PlainUpload`), then :data:`DOWNLOAD`
(:class:`PlainDownload` -> :class:`Stored`). CKKS: :data:`INDEX` (:class:`UploadRequest` -> :class:`Index`),
:data:`UPLOAD` (:class:`CKKSUploadRequest` -> :class:`CKKSUpload`), :data:`DOWNLOAD` (:class:`CKKSDownload` ->
:class:`Stored`). A CKKS request is told apart from a plaintext one by its ``slots`` value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

PHASE = "fedgcn-communication"
INDEX, UPLOAD, DOWNLOAD = "fedgcn.index", "fedgcn.upload", "fedgcn.download"
Values = dict[str, Any]


def _i64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.int64, copy=False)


def is_ckks(values: Mapping[str, Any]) -> bool:
    """Whether an upload or download request belongs to the CKKS variant."""
    return "slots" in values


@dataclass(frozen=True)
class UploadRequest:
    """Server -> client, first message (plaintext upload, or CKKS index): the server's number of hops."""

    hops: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {"hops": int(self.hops)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "UploadRequest":
        return cls(hops=int(values["hops"]))


@dataclass(frozen=True)
class PlainUpload:
    """Client -> server: the rows it contributes to (``ids``), the rows it needs back (``request``) and its
    contributions, encoded (``rows``: the arrays of ``encoding``)."""

    ids: np.ndarray
    request: np.ndarray
    rows: list[np.ndarray]
    encoding: str
    width: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [self.ids, self.request, *self.rows], {"encoding": self.encoding, "width": int(self.width)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "PlainUpload":
        if len(arrays) < 3:
            raise ValueError(f"a FedGCN upload carries ids, request and rows; got {len(arrays)} arrays")
        return cls(_i64(arrays[0]), _i64(arrays[1]), list(arrays[2:]), str(values["encoding"]), int(values["width"]))


@dataclass(frozen=True)
class PlainDownload:
    """Server -> client: the per-row sums of every client's contributions for exactly the rows it requested."""

    rows: np.ndarray
    sums: list[np.ndarray]
    encoding: str
    width: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [self.rows, *self.sums], {"encoding": self.encoding, "width": int(self.width)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "PlainDownload":
        if not arrays:
            raise ValueError("a FedGCN download carries the rows and their sums; got no array")
        return cls(_i64(arrays[0]), list(arrays[1:]), str(values["encoding"]), int(values["width"]))


@dataclass(frozen=True)
class Index:
    """Client -> server (CKKS): the rows it contributes to and requests, its width, its key's fingerprint and the
    CKKS context without any key."""

    ids: np.ndarray
    request: np.ndarray
    width: int
    key_fingerprint: str
    server_context: bytes

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [self.ids, self.request], {
            "width": int(self.width),
            "key_fingerprint": self.key_fingerprint,
            "server_context": self.server_context,
        }

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "Index":
        if len(arrays) != 2:
            raise ValueError(f"a FedGCN index carries 2 arrays (ids, request), got {len(arrays)}")
        return cls(
            _i64(arrays[0]),
            _i64(arrays[1]),
            int(values["width"]),
            str(values["key_fingerprint"]),
            bytes(values["server_context"]),
        )


@dataclass(frozen=True)
class CKKSUploadRequest:
    """Server -> client (CKKS): the rows the client contributes and their flat slot offsets in the shared layout."""

    rows: np.ndarray
    offsets: np.ndarray
    slots: int
    width: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [self.rows, self.offsets], {"slots": int(self.slots), "width": int(self.width)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "CKKSUploadRequest":
        if len(arrays) != 2:
            raise ValueError(f"a FedGCN CKKS upload request carries 2 arrays (rows, offsets), got {len(arrays)}")
        return cls(_i64(arrays[0]), _i64(arrays[1]), int(values["slots"]), int(values["width"]))


@dataclass(frozen=True)
class CKKSUpload:
    """Client -> server (CKKS): which ciphertexts of the layout it filled, and them, serialised."""

    ct_index: np.ndarray
    lengths: np.ndarray
    blob: np.ndarray

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [self.ct_index, self.lengths, self.blob], {"ciphertexts": int(len(self.ct_index))}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "CKKSUpload":
        if len(arrays) != 3:
            raise ValueError(f"a FedGCN CKKS upload carries 3 arrays (index, lengths, blob), got {len(arrays)}")
        return cls(_i64(arrays[0]), arrays[1], arrays[2])


@dataclass(frozen=True)
class CKKSDownload:
    """Server -> client (CKKS): the summed ciphertexts that hold exactly the rows the client requested."""

    rows: np.ndarray
    offsets: np.ndarray
    ct_index: np.ndarray
    lengths: np.ndarray
    blob: np.ndarray
    slots: int
    width: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return (
            [self.rows, self.offsets, self.ct_index, self.lengths, self.blob],
            {"slots": int(self.slots), "width": int(self.width)},
        )

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "CKKSDownload":
        if len(arrays) != 5:
            raise ValueError(f"a FedGCN CKKS download carries 5 arrays, got {len(arrays)}")
        rows, offsets, ct_index, lengths, blob = arrays
        return cls(_i64(rows), _i64(offsets), _i64(ct_index), lengths, blob, int(values["slots"]), int(values["width"]))


@dataclass(frozen=True)
class Stored:
    """Client -> server: how many rows it stored."""

    stored_rows: int

    def encode(self) -> tuple[list[np.ndarray], Values]:
        return [], {"stored_rows": int(self.stored_rows)}

    @classmethod
    def decode(cls, arrays: list[np.ndarray], values: Mapping[str, Any]) -> "Stored":
        return cls(int(values["stored_rows"]))
