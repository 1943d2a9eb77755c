"""Flower-free privacy primitives (CKKS contexts and key provisioning, packing, byte accounting).

The public names (the rest of :mod:`~flowergraph.privacy.ckks`, :mod:`~flowergraph.privacy.dp` and
:mod:`~flowergraph.privacy.packing` is internal): the CKKS parameters, :data:`POLY_MODULUS_DEGREE` (N = 4096:
N / 2 = 2048 slots a ciphertext), :data:`COEFF_MOD_BIT_SIZES`, :data:`SCALE_BITS`, and :func:`write_key_file`
(``python -m flowergraph.privacy.ckks keygen PATH`` from Python).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .ckks import (
        COEFF_MOD_BIT_SIZES as COEFF_MOD_BIT_SIZES,
        POLY_MODULUS_DEGREE as POLY_MODULUS_DEGREE,
        SCALE_BITS as SCALE_BITS,
        write_key_file as write_key_file,
    )

_EXPORTS = {
    "COEFF_MOD_BIT_SIZES": "ckks",
    "POLY_MODULUS_DEGREE": "ckks",
    "SCALE_BITS": "ckks",
    "write_key_file": "ckks",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
