"""CKKS homomorphic encryption for additive aggregation (TenSEAL), Flower-free.

Keys. All clients share one CKKS secret context, provisioned out of band as a *key file* (the simulation
launcher creates one per run; in deployment each SuperNode's node config names its copy). The server only ever
holds a context without keys (it adds ciphertexts, which needs the parameters, not a key), so it cannot
decrypt. :func:`load_key_file` refuses a file that is not a CKKS context or holds no secret key;
:func:`load_server_context` refuses a context that holds one.

Parameters. The server only adds, so one data prime suffices: N = 4096 (2048 slots), coefficient moduli
[60, 49] bits (109 bits: the 128-bit-security maximum for N = 4096), scale 2^40. Precision after summing ten
vectors of magnitude ~10 is ~1e-8. A ciphertext serialises to ~65.7 KB (32 B per slot; float32 plaintext is
4 B per value).

Packing (:func:`he_layout`). Ciphertexts can only be added slot by slot, so every client must put a row at the
same slots. The server, which knows which rows each client contributes to and requests (it learns this in the
plaintext protocol too), groups rows by (contributor set, requester set); each group starts at a fresh
ciphertext and its rows follow each other (width d + 1 slots each, rows may straddle ciphertexts inside a
group). Every ciphertext therefore carries rows of one group only: a client receives sums only of rows it
requested, and uploads ciphertexts only for groups it contributes to.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import KeyFileError

POLY_MODULUS_DEGREE = 4096
COEFF_MOD_BIT_SIZES = (60, 49)
SCALE_BITS = 40


def _ts():
    import tenseal as ts

    return ts


def create_secret_context(
    poly_modulus_degree: int = POLY_MODULUS_DEGREE,
    coeff_mod_bit_sizes: tuple[int, ...] = COEFF_MOD_BIT_SIZES,
    scale_bits: int = SCALE_BITS,
):
    ts = _ts()
    ctx = ts.context(
        ts.SCHEME_TYPE.CKKS, poly_modulus_degree=poly_modulus_degree, coeff_mod_bit_sizes=list(coeff_mod_bit_sizes)
    )
    ctx.global_scale = 2.0**scale_bits
    return ctx


def write_key_file(path: str | os.PathLike, ctx=None) -> Path:
    """Write a CKKS secret context (parameters + secret and public key) readable only by its owner."""
    ctx = ctx or create_secret_context()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ctx.serialize(save_public_key=True, save_secret_key=True, save_galois_keys=False, save_relin_keys=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def load_key_file(path: str | os.PathLike):
    """A client's secret context from its key file; KeyFileError names the file and what is wrong."""
    ts = _ts()
    path = Path(path)
    if not str(path) or not path.is_file():
        raise KeyFileError(
            f"key-file {str(path)!r} does not exist; create one with "
            f"`python -m flowergraph.privacy.ckks keygen <path>` and give every client a copy"
        )
    try:
        ctx = ts.context_from(path.read_bytes())
    except Exception as exc:
        raise KeyFileError(f"key-file {str(path)!r} is not a TenSEAL CKKS context ({exc})") from None
    if not ctx.is_private():
        raise KeyFileError(
            f"key-file {str(path)!r} holds no secret key (a public context); clients need the secret context"
        )
    try:
        ts.ckks_vector(ctx, [1.0])
    except Exception as exc:
        raise KeyFileError(f"key-file {str(path)!r} is not a usable CKKS context ({exc})") from None
    return ctx


def server_context_bytes(ctx) -> bytes:
    """The context the server gets: encryption parameters only, no key of any kind."""
    return ctx.serialize(save_public_key=False, save_secret_key=False, save_galois_keys=False, save_relin_keys=False)


def fingerprint(ctx) -> str:
    """Identifies a key: clients with different key files give different fingerprints."""
    data = ctx.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=False, save_relin_keys=False)
    return hashlib.sha256(data).hexdigest()[:16]


def load_server_context(data: bytes):
    ts = _ts()
    try:
        ctx = ts.context_from(bytes(data))
    except Exception as exc:
        raise ValueError(f"the server context is not a TenSEAL context ({exc})") from None
    if ctx.is_private():
        raise ValueError("refusing a context that holds a secret key: the server must not be able to decrypt")
    return ctx


def num_slots(ctx) -> int:
    """CKKS packs N/2 values per ciphertext."""
    return int(ctx.seal_context().data.key_context_data().parms().poly_modulus_degree()) // 2


@dataclass
class HELayout:
    """Where every row lives in the ciphertexts: flat slot offset = ciphertext index * slots + position."""

    width: int
    slots: int
    row_ids: np.ndarray  # int64, rows in layout order
    offsets: np.ndarray  # int64, flat slot offset of each row
    groups: list[tuple[frozenset, frozenset, int, int]] = field(default_factory=list)  # (contrib, req, ct0, n)
    num_ciphertexts: int = 0

    def __post_init__(self):
        if np.any(np.diff(self.offsets) <= 0):  # rows_for finds a group's rows by binary search
            raise ValueError("HELayout offsets must be strictly ascending (he_layout builds them so)")

    def rows_for(self, client: int, role: str) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, offsets) of the rows a client contributes to (``role="contributor"``) or requested."""
        pos = 0 if role == "contributor" else 1
        ids, offs = [], []
        for g in self.groups:
            if client in g[pos]:
                ct0, n_ct = g[2], g[3]
                lo, hi = ct0 * self.slots, (ct0 + n_ct) * self.slots
                sel = slice(*np.searchsorted(self.offsets, [lo, hi]).tolist())  # offsets ascend: one slice
                ids.append(self.row_ids[sel])
                offs.append(self.offsets[sel])
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(ids), np.concatenate(offs)


def he_layout(contributed: dict[int, np.ndarray], requested: dict[int, np.ndarray], width: int, slots: int) -> HELayout:
    """Group rows by (contributor set, requester set) and give each group its own run of ciphertexts."""
    members: dict[int, list[set, set]] = {}
    for client, ids in contributed.items():
        for r in np.asarray(ids).tolist():
            members.setdefault(r, [set(), set()])[0].add(client)
    for client, ids in requested.items():
        for r in np.asarray(ids).tolist():
            if r not in members:
                raise ValueError(f"client {client} requested row {r} that no client contributes to")
            members[r][1].add(client)
    by_group: dict[tuple[frozenset, frozenset], list[int]] = {}
    for r, (contrib, req) in members.items():
        by_group.setdefault((frozenset(contrib), frozenset(req)), []).append(r)
    keys = sorted(by_group, key=lambda k: (sorted(k[0]), sorted(k[1])))
    row_ids, offsets, groups = [], [], []
    ct = 0
    for key in keys:
        rows = sorted(by_group[key])
        n_ct = math.ceil(len(rows) * width / slots)
        base = ct * slots
        row_ids.extend(rows)
        offsets.extend(base + i * width for i in range(len(rows)))
        groups.append((key[0], key[1], ct, n_ct))
        ct += n_ct
    return HELayout(
        width=width,
        slots=slots,
        row_ids=np.asarray(row_ids, np.int64),
        offsets=np.asarray(offsets, np.int64),
        groups=groups,
        num_ciphertexts=ct,
    )


def _scatter(rows_values: np.ndarray, offsets: np.ndarray, slots: int) -> dict[int, np.ndarray]:
    """Place rows at their flat offsets; returns ciphertext index -> slot vector (float64)."""
    width = rows_values.shape[1]
    out: dict[int, np.ndarray] = {}
    for values, off in zip(rows_values, offsets.tolist()):
        pos = 0
        while pos < width:
            ct, start = divmod(off + pos, slots)
            take = min(width - pos, slots - start)
            vec = out.get(ct)
            if vec is None:
                vec = out[ct] = np.zeros(slots, dtype=np.float64)
            vec[start : start + take] = values[pos : pos + take]
            pos += take
    return out


def encrypt_rows(ctx, values: np.ndarray, offsets: np.ndarray, slots: int) -> tuple[np.ndarray, list[bytes]]:
    """Encrypt rows placed at their offsets: (ciphertext indices, serialised ciphertexts)."""
    ts = _ts()
    vectors = _scatter(np.asarray(values, dtype=np.float64), np.asarray(offsets), slots)
    index = np.array(sorted(vectors), dtype=np.int64)
    return index, [ts.ckks_vector(ctx, vectors[i]).serialize() for i in index.tolist()]


class CiphertextSum:
    """Server side: adds ciphertexts per index without any key.

    :meth:`add` parses every ciphertext of one upload before adding any of them: an upload with one malformed
    (truncated, corrupt, other parameters) ciphertext changes nothing, so a rejected upload is never partly summed.
    """

    def __init__(self, server_ctx):
        self.ctx = server_ctx
        self.sums: dict[int, object] = {}

    def parse(self, blobs: list[bytes], size: int | None = None) -> list:
        """The ciphertexts of ``blobs`` (ValueError naming the first that does not parse, or that does not hold
        ``size`` values when given); nothing is added."""
        ts = _ts()
        out = []
        for k, blob in enumerate(blobs):
            try:
                vec = ts.ckks_vector_from(self.ctx, bytes(blob))
            except Exception as exc:  # noqa: BLE001 (TenSEAL raises several types for a malformed ciphertext)
                raise ValueError(
                    f"ciphertext {k} of {len(blobs)} does not parse ({type(exc).__name__}: {str(exc)[:120]})"
                ) from None
            if size is not None and vec.size() != size:
                raise ValueError(f"ciphertext {k} of {len(blobs)} holds {vec.size()} values, expected {size}")
            out.append(vec)
        return out

    def add(self, index: np.ndarray, blobs: list[bytes]) -> None:
        if len(index) != len(blobs):
            raise ValueError(f"{len(index)} ciphertext indices for {len(blobs)} ciphertexts")
        self.add_parsed(index, self.parse(blobs), copy=False)  # all parsed first: a bad one adds nothing

    def add_parsed(self, index: np.ndarray, vectors: list, copy: bool = True) -> None:
        """Add already parsed ciphertexts (:meth:`parse`); with ``copy`` the vectors themselves are left
        unchanged (the sum starts from a copy), so they can be summed again."""
        if len(index) != len(vectors):
            raise ValueError(f"{len(index)} ciphertext indices for {len(vectors)} ciphertexts")
        for i, vec in zip(np.asarray(index).tolist(), vectors):
            if i not in self.sums:
                self.sums[i] = vec  # (CKKSVector.copy() crashes with a key-less context)
            elif copy:
                self.sums[i] = self.sums[i] + vec  # a new vector: neither summand changes
            else:
                self.sums[i] += vec

    def serialized(self, index: np.ndarray) -> list[bytes]:
        missing = [int(i) for i in index if int(i) not in self.sums]
        if missing:
            raise ValueError(f"no client contributed to ciphertexts {missing[:5]}")
        return [self.sums[int(i)].serialize() for i in index]


def ciphertexts_for(offsets: np.ndarray, width: int, slots: int) -> np.ndarray:
    """Indices of the ciphertexts that hold rows at ``offsets`` (each ``width`` slots long)."""
    if len(offsets) == 0:
        return np.zeros(0, np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    first, last = offsets // slots, (offsets + width - 1) // slots
    counts = last - first + 1  # every ciphertext from first to last, for every row
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.unique(np.repeat(first, counts) + (np.arange(int(counts.sum()), dtype=np.int64) - starts))


def decrypt_rows(ctx, index: np.ndarray, blobs: list[bytes], offsets: np.ndarray, width: int, slots: int) -> np.ndarray:
    """Decrypt the ciphertexts and read the rows at ``offsets``: [len(offsets), width] float32."""
    ts = _ts()
    plain = {
        int(i): np.asarray(ts.ckks_vector_from(ctx, b).decrypt(), dtype=np.float64)
        for i, b in zip(np.asarray(index).tolist(), blobs)
    }
    out = np.zeros((len(offsets), width), dtype=np.float64)
    for r, off in enumerate(np.asarray(offsets).tolist()):
        pos = 0
        while pos < width:
            ct, start = divmod(off + pos, slots)
            take = min(width - pos, slots - start)
            if ct not in plain:
                raise ValueError(f"ciphertext {ct} (row at offset {off}) is missing from the reply")
            out[r, pos : pos + take] = plain[ct][start : start + take]
            pos += take
    return out.astype(np.float32)


# ------------------------------------------------------------------------------------------------------------
# Any float vector (model updates under secure-agg=ckks): slot-packed ciphertexts, added by index on the server.
# ------------------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------------------
# Checked uploads (secure-agg=ckks): every ciphertext carries a check value in its last slot, and each upload
# comes with one check ciphertext, so that the decrypting client can tell a sum of the round's uploads from
# anything else (see flowergraph.strategies.secure for the protocol).
# ------------------------------------------------------------------------------------------------------------

CHECK_TOLERANCE = 1e-4  # CKKS's error on a check slot is ~1e-8 per summand
FLOOD_BITS = 20  # decryptions are flooded with Gaussian noise of std 2^-20 and rounded to multiples of 2^-20


def check_key(ctx) -> bytes:
    """A secret only the data owners hold (derived from the secret key in the key file): it makes the check
    values, which the server therefore cannot compute or forge."""
    data = ctx.serialize(save_public_key=False, save_secret_key=True, save_galois_keys=False, save_relin_keys=False)
    return hashlib.sha256(b"flowergraph/ckks-check/v1\0" + data).digest()


def _uniform(key: bytes, label: str, count: int) -> np.ndarray:
    """``count`` values in [1, 2), a pseudo-random function of (key, label)."""
    raw = hashlib.shake_256(key + label.encode()).digest(8 * count)
    return 1.0 + (np.frombuffer(raw, dtype="<u8") >> np.uint64(11)).astype(np.float64) / float(1 << 53)


UPDATE = "update"  # the purpose of a training round's encrypted update (the other purposes: a method's own sums)


def _label(kind: str, server_round: int, partition: int, purpose: str) -> str:
    """The check values' label: every (purpose, round, partition) has its own, so an upload made for one sum (a
    method's scores, say) can never pass as part of another (the round's update sum)."""
    where = f"{int(server_round)}/{int(partition)}"
    return f"{kind}/{where}" if purpose == UPDATE else f"{kind}/{purpose}/{where}"


def sum_check_values(key: bytes, server_round: int, partition: int, chunks: int, purpose: str = UPDATE) -> np.ndarray:
    """The check value in the last slot of each of a client's ciphertexts for ``purpose`` in a round."""
    return _uniform(key, _label("sum", server_round, partition, purpose), chunks)


def check_vector(key: bytes, server_round: int, partition: int, slots: int, purpose: str = UPDATE) -> np.ndarray:
    """What a client's check ciphertext for ``purpose`` in a round encrypts (every slot)."""
    return _uniform(key, _label("check", server_round, partition, purpose), slots)


def checked_chunks(length: int, slots: int) -> int:
    """Ciphertexts that hold ``length`` values with one check slot each."""
    return max(1, math.ceil(length / (slots - 1)))


def encrypt_checked(
    ctx, vector: np.ndarray, key: bytes, server_round: int, partition: int, purpose: str = UPDATE
) -> list[bytes]:
    """A client's upload: ``vector`` in :func:`checked_chunks` ciphertexts of ``slots - 1`` values and the
    round's check value each, then its check ciphertext (serialised); ``purpose`` names the sum it is for
    (:data:`UPDATE`, or a method's own)."""
    ts = _ts()
    slots = num_slots(ctx)
    vector = np.asarray(vector, dtype=np.float64).ravel()
    chunks = checked_chunks(len(vector), slots)
    plain = np.zeros((chunks, slots), dtype=np.float64)
    flat = plain[:, :-1].reshape(-1)
    flat[: len(vector)] = vector
    plain[:, :-1] = flat.reshape(chunks, slots - 1)
    plain[:, -1] = sum_check_values(key, server_round, partition, chunks, purpose)
    blobs = [ts.ckks_vector(ctx, row).serialize() for row in plain]
    blobs.append(ts.ckks_vector(ctx, check_vector(key, server_round, partition, slots, purpose)).serialize())
    return blobs


class NotASum(ValueError):
    """What the decrypting client was asked to decrypt is not the sum of the round's uploads it was told of."""


def check_ciphertext_ok(ctx, blob: bytes, key: bytes, server_round: int, partition: int, purpose: str = UPDATE) -> bool:
    """Whether ``blob`` decrypts (under this key) to the check vector of (purpose, round, partition)."""
    ts = _ts()
    try:
        got = np.asarray(ts.ckks_vector_from(ctx, bytes(blob)).decrypt(), dtype=np.float64)
    except Exception:  # noqa: BLE001 (malformed: not ok)
        return False
    want = check_vector(key, server_round, partition, num_slots(ctx), purpose)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= CHECK_TOLERANCE))


def decrypt_checked(
    ctx, blobs: list[bytes], length: int, key: bytes, server_round: int, partitions: list[int], purpose: str = UPDATE
) -> np.ndarray:
    """The ``length`` values of a sum of uploads of ``partitions`` in ``server_round``; :class:`NotASum` unless
    every ciphertext's check slot equals the sum of those partitions' check values (one upload of each, added
    once, chunks in place). The plaintext is returned flooded and rounded (:func:`flood`)."""
    ts = _ts()
    slots = num_slots(ctx)
    chunks = checked_chunks(length, slots)
    if len(blobs) != chunks:
        raise NotASum(f"{len(blobs)} ciphertexts cannot hold {length} values ({slots - 1} per ciphertext)")
    want = np.sum([sum_check_values(key, server_round, p, chunks, purpose) for p in partitions], axis=0)
    rows = []
    for j, blob in enumerate(blobs):
        try:
            row = np.asarray(ts.ckks_vector_from(ctx, bytes(blob)).decrypt(), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001
            raise NotASum(f"ciphertext {j} does not parse ({type(exc).__name__})") from None
        if row.shape != (slots,) or abs(row[-1] - want[j]) > CHECK_TOLERANCE * max(1, len(partitions)):
            raise NotASum(
                f"ciphertext {j} is not the sum of one upload of each of partitions "
                f"{sorted(partitions)} in round {server_round}"
            )
        rows.append(row[:-1])
    return flood(np.concatenate(rows)[:length])


def flood(values: np.ndarray, bits: int = FLOOD_BITS, rng: np.random.Generator | None = None) -> np.ndarray:
    """``values`` + Gaussian noise of standard deviation ``2^-bits``, rounded to multiples of ``2^-bits``: the
    low-order bits of a CKKS decryption carry the encryption noise, which leaks the secret key to whoever sees
    many decryptions (Li & Micciancio, EUROCRYPT 2021); noise ~2^10 times larger than CKKS's (~1e-9 here) drowns
    it. The noise comes from the operating system's entropy."""
    rng = rng if rng is not None else np.random.default_rng()
    step = 2.0**-bits
    values = np.asarray(values, dtype=np.float64)
    return np.round((values + rng.normal(0.0, step, values.shape)) / step) * step


def encrypt_vector(ctx, vector: np.ndarray) -> list[bytes]:
    """Encrypt a float vector in ``ceil(len / slots)`` ciphertexts (chunk k holds values k*slots..), serialised."""
    ts = _ts()
    vector = np.asarray(vector, dtype=np.float64).ravel()
    slots = num_slots(ctx)
    return [ts.ckks_vector(ctx, vector[i : i + slots]).serialize() for i in range(0, max(len(vector), 1), slots)]


def decrypt_vector(ctx, blobs: list[bytes], length: int) -> np.ndarray:
    """The float64 vector of ``length`` values that :func:`encrypt_vector` (and sums of it) encrypted."""
    ts = _ts()
    slots = num_slots(ctx)
    if len(blobs) != max(1, math.ceil(length / slots)):
        raise ValueError(f"{len(blobs)} ciphertexts cannot hold exactly {length} values ({slots} per ciphertext)")
    out = np.concatenate([np.asarray(ts.ckks_vector_from(ctx, b).decrypt(), dtype=np.float64) for b in blobs])
    return out[:length]


def flatten_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    """Arrays as one float64 vector (the layout :func:`unflatten_arrays` reverses with the same shapes)."""
    if not arrays:
        return np.zeros(0, dtype=np.float64)
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def unflatten_arrays(vector: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    """The vector cut back into arrays of ``like``'s shapes and dtypes."""
    sizes = [int(np.prod(a.shape)) for a in like]
    if len(vector) != sum(sizes):
        raise ValueError(f"a vector of {len(vector)} values does not fit arrays of {sum(sizes)} values")
    out, pos = [], 0
    for a, n in zip(like, sizes):
        out.append(np.asarray(vector[pos : pos + n]).reshape(a.shape).astype(a.dtype))
        pos += n
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m flowergraph.privacy.ckks keygen PATH``: create a key file to give every client."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m flowergraph.privacy.ckks")
    sub = parser.add_subparsers(dest="cmd", required=True)
    keygen = sub.add_parser("keygen", help="write a new CKKS secret context (share it with clients only)")
    keygen.add_argument("path", help="the key file to write (it holds the secret key: keep it with the clients)")
    keygen.add_argument(
        "--poly-modulus-degree",
        type=int,
        default=POLY_MODULUS_DEGREE,
        choices=(4096, 8192),
        help="CKKS ring degree N (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    bits = COEFF_MOD_BIT_SIZES if args.poly_modulus_degree == 4096 else (60, 60)
    path = write_key_file(args.path, create_secret_context(args.poly_modulus_degree, bits))
    print(f"wrote {path} (CKKS N={args.poly_modulus_degree}, secret key included: give it to clients only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
