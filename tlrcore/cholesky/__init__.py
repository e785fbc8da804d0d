"""TLR Cholesky factorization ``A ~ L L^T``: :func:`cholesky` chooses the variant among
:mod:`~tlrcore.cholesky.left` (left-looking, ARA; the default in the tile layout),
:mod:`~tlrcore.cholesky.right` (right-looking, QR and SVD recompression: a deterministic
reference), :mod:`~tlrcore.cholesky.pivoted` (tile pivoting) and
:mod:`~tlrcore.cholesky.packed` (whole tile columns in the packed layout, any back end),
with the :mod:`~tlrcore.cholesky.safeguards`; the factors are in
:mod:`~tlrcore.cholesky.factor`.

``tlrcore.cholesky`` is the function :func:`cholesky` (imported over the package's name),
so ``import tlrcore.cholesky.left as m`` fails; write ``from tlrcore.cholesky import left``."""

from __future__ import annotations

import logging
import warnings
from typing import Literal

from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore._typing import SafeguardSpec, Seed
from tlrcore.cholesky.factor import PackedCholesky, TLRCholesky
from tlrcore.cholesky.left import left_looking
from tlrcore.cholesky.packed import packed_left_looking
from tlrcore.cholesky.pivoted import pivoted_left_looking
from tlrcore.cholesky.right import right_looking
from tlrcore.cholesky.safeguards import (
    ZERO_MATRIX_HINT,
    DiagonalFactorizer,
    check_shift,
    compensation_form,
    compensation_lifts,
    parse_safeguard,
    shift_schedule,
)
from tlrcore.errors import NotPositiveDefiniteError
from tlrcore.matrix import TLRMatrix

__all__ = ["VARIANTS", "cholesky", "PackedCholesky", "TLRCholesky"]

logger = logging.getLogger(__name__)

#: The values of :func:`cholesky`'s ``variant`` (``"batched"`` is a deprecated alias of
#: ``"packed"``).
VARIANTS = ("left", "right", "packed")


def cholesky(
    A: TLRMatrix,
    accuracy: float | None = None,
    block_size: int = 16,
    random_state: Seed = 0,
    overwrite_a: bool = False,
    variant: Literal["left", "right", "packed", "batched"] | None = None,
    safeguard: SafeguardSpec = None,
    shift: float = 0.0,
) -> TLRCholesky | PackedCholesky:
    """TLR Cholesky factorization ``A ~ L L^T``.

    Parameters
    ----------
    A : TLRMatrix
        Symmetric positive definite (or, with a `safeguard` or `shift`, nearly so).
    accuracy : float, optional
        Updated tiles are compressed to ``accuracy ||A||_F / n_tiles`` (default: `A`'s
        tolerance).
    block_size : int, default 16
        ARA sampling block (in the packed layout, rounds after the second draw twice as
        many columns).
    random_state : int, default 0
        Seeds the samples; equal inputs give bit-identical factors.
    overwrite_a : bool, default False
        Release `A`'s tiles once no longer needed (peak memory near the larger of `A` and its
        factor), factoring diagonal tiles in place unless views
        (:meth:`~tlrcore.TLRMatrix.shared`, :meth:`~tlrcore.TLRMatrix.truncated`) read them.
        `A` is consumed even on failure. Not with ``safeguard="shift"``.
    variant : {"left", "right", "packed"}, optional
        ``"right"`` has no random sampling and no safeguards; ``"packed"`` (the GPU
        algorithm) has every safeguard but ``"pivot"``. Default ``"packed"`` for a packed `A`
        (``method="batched"``), else ``"left"``; ``"batched"`` is a deprecated alias of
        ``"packed"``.
    safeguard : None, str or sequence of str, default None
        For a matrix not positive definite at this accuracy
        (:mod:`tlrcore.cholesky.safeguards`): ``"compensate"`` (every tile gets back its
        update's compression tail in rowsum form, nearly singular tiles a lift by
        ``A.tile_errors``; within ``||L L^T - A_tlr||_F <= (1 + sqrt(b / n_t) + 1.25 sqrt(b))
        accuracy ||A_tlr||_F``), ``"compensate-block"`` (the tail as a block: ``1 + 1 /
        sqrt(n_t) + 1.25 sqrt(b)``), ``"shift"`` (retry with the smallest sufficient
        power-of-two multiple of the tile tolerance), ``"schur"`` (compensate failing tiles
        only), ``"modified"`` (modified Cholesky of a failing tile), ``"pivot"`` (tile
        pivoting); combine as ``"compensate+modified"`` or ``("compensate", "shift")``.
    shift : float, default 0.0
        Added to every diagonal entry of `A` (which is not modified).

    Returns
    -------
    TLRCholesky or PackedCholesky
        A :class:`tlrcore.CholeskyFactor` on `A`'s back end, with ``.perturbation =
        ||E||_F`` (0.0 when nothing changed), ``.perturbation_parts``, ``.shift``,
        ``.compensated_tiles``, ``.lifted_tiles``, ``.modified_tiles`` and ``.perm``.

    Raises
    ------
    TypeError
        If `A` is not a TLRMatrix.
    ConsumedMatrixError
        If `A` was consumed by an earlier ``cholesky(A, overwrite_a=True)``.
    ValueError
        If `accuracy` is not in (0, 1), `variant` or a safeguard is unknown, `shift` is
        negative, or the options do not combine.
    NotPositiveDefiniteError
        If an updated diagonal tile is not positive definite and the safeguards did not help;
        ``.tile`` is its index (its factor position, with tile pivoting).
    """
    if not isinstance(A, TLRMatrix):
        raise TypeError(f"A must be a tlrcore.TLRMatrix; got {type(A).__name__}.")
    A._check_usable()
    if variant == "batched":
        warnings.warn(
            "variant='batched' is deprecated; use variant='packed' (the same factorization).",
            DeprecationWarning,
            stacklevel=2,
        )
        variant = "packed"
    if variant is None:
        variant = "packed" if A.packed is not None else "left"
    if variant not in VARIANTS:
        raise ValueError(f"variant must be 'left', 'right' or 'packed'; got {variant!r}.")
    if variant != "packed" and A.backend.batched_by_default:
        raise ValueError(
            f"a matrix on backend={A.backend.name!r} is factored with variant='packed' only."
        )
    guards = parse_safeguard(safeguard)
    shift = check_shift(shift)
    block_size = check_int(block_size, "block_size", 1)
    random_state = check_random_state(random_state)
    if variant == "right" and (guards or shift):
        raise ValueError(
            "safeguard and shift are implemented for variant='left' only; drop variant='right'."
        )
    if variant == "packed" and "pivot" in guards:
        raise ValueError(
            f"variant='packed' has no tile pivoting; it supports safeguard='compensate', "
            f"'compensate-block', 'schur', 'modified' and 'shift' (combinations allowed); got "
            f"{safeguard!r}. Drop 'pivot', or use variant='left' on a matrix on the NumPy back end."
        )
    if variant == "packed" and overwrite_a and (compensation_form(guards) or "schur" in guards):
        raise ValueError(
            "variant='packed' with compensation or 'schur' reads A's diagonal tiles, so it "
            "cannot be combined with overwrite_a=True."
        )
    if overwrite_a and "shift" in guards:
        raise ValueError(
            "safeguard='shift' may restart from A, so it cannot be combined with overwrite_a=True."
        )
    tolerance = (
        A.tolerance
        if accuracy is None
        else check_accuracy(accuracy) * A.frobenius_norm() / A.n_tiles
    )
    try:
        if variant == "right":
            factor = right_looking(A, tolerance, overwrite_a)
        else:
            factor = _safeguarded(
                A, tolerance, guards, shift, block_size, random_state, overwrite_a, variant
            )
    finally:
        if overwrite_a:
            # Released tiles, or (packed) diagonal tiles factored in place: A is gone,
            # also when the factorization failed midway.
            A._consume()
    logger.debug("TLR Cholesky (variant %r): %r", variant, factor)
    return factor


def _safeguarded(
    A, tolerance, guards, shift, block_size, random_state, overwrite_a, variant="left"
):
    """Left-looking factorization with the safeguards; under ``"shift"``, retries with a growing
    shift."""
    if variant == "packed":

        def factorization(A, tolerance, diagonal, block_size, random_state, overwrite_a):
            release = A._release_column if overwrite_a else None
            return packed_left_looking(
                A.pack(), tolerance, diagonal, block_size, random_state, release
            )
    elif "pivot" in guards:
        factorization = pivoted_left_looking
    else:
        factorization = left_looking
    extra = [0.0] + (shift_schedule(tolerance, A.n_tiles) if "shift" in guards else [])
    lifts = (
        compensation_lifts(A.tile_errors, tolerance, A.n_tiles)
        if compensation_form(guards)
        else None
    )
    for attempt, added in enumerate(extra):
        diagonal = DiagonalFactorizer(
            tolerance,
            shift + added,
            "schur" in guards,
            "modified" in guards,
            compensation_form(guards),
            lifts,
        )
        try:
            factor = factorization(A, tolerance, diagonal, block_size, random_state, overwrite_a)
        except NotPositiveDefiniteError as exc:
            if attempt + 1 == len(extra):
                if "shift" in guards and tolerance == 0:
                    raise NotPositiveDefiniteError(
                        f"diagonal tile {exc.tile} is not positive definite, and safeguard='shift' "
                        "has no shift to try: A is zero (||A||_F = 0), so the tile tolerance, the "
                        "unit of its shifts, is 0 and no relative shift exists. "
                        f"{ZERO_MATRIX_HINT}",
                        tile=exc.tile,
                    ) from exc
                if len(extra) > 1:
                    raise NotPositiveDefiniteError(
                        f"{exc} The automatic shift reached {shift + added:.3g} "
                        f"({added / tolerance:.0f} tile tolerances), past the bound that "
                        "guarantees success for a positive semidefinite A; A is probably "
                        "indefinite (use tlrcore.ldl).",
                        tile=exc.tile,
                    ) from exc
                raise
            logger.debug(
                "TLR Cholesky failed at tile %s; retrying with shift %.3g",
                exc.tile,
                shift + extra[attempt + 1],
            )
            continue
        factor.shift = shift + added
        factor.perturbation = diagonal.perturbation
        factor.perturbation_parts = diagonal.perturbation_parts
        factor.modified_tiles = tuple(diagonal.modified_tiles)
        factor.compensated_tiles = tuple(diagonal.compensated_tiles)
        factor.lifted_tiles = tuple(diagonal.lifted_tiles)
        return factor
