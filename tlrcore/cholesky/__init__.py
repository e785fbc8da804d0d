r"""TLR Cholesky factorization ``A ~ L L^T``: :func:`cholesky` chooses the variant.

Modules
-------
left
    Left-looking, every off-diagonal tile updated and compressed once by ARA (H2Opus,
    Algorithms 3-6); the default for a matrix in the tile layout.
right
    Right-looking, the trailing tiles recompressed by QR and SVD after every column: no
    random sampling; the reference the left-looking factor is checked against.
pivoted
    Left-looking with symmetric tile pivoting (``safeguard="pivot"``).
packed
    Left-looking on whole tile columns with batched kernels in the packed layout
    (:mod:`tlrcore.packed`), on any back end; the default for a packed matrix.
safeguards
    Compensation, shift, Schur compensation and modified Cholesky for matrices that lost
    definiteness.
factor
    The factors: :class:`TLRCholesky` (tile layout) and :class:`PackedCholesky`.
_steps
    The steps the tile-layout variants (and :mod:`tlrcore.ldl`) share.

The attribute ``tlrcore.cholesky`` is the function :func:`cholesky` (``tlrcore`` imports
it over the package's name), so ``import tlrcore.cholesky.left as m`` fails; write
``from tlrcore.cholesky import left``, ``from tlrcore.cholesky.left import left_looking``
or ``importlib.import_module("tlrcore.cholesky.left")``.
"""

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
        Relative accuracy of the updated tiles: each is compressed to the absolute
        tolerance ``accuracy * ||A||_F / n_tiles``. Default: the tolerance `A` was built
        with.
    block_size : int, default 16
        ARA sampling block (columns per sample) of the left-looking variant.
    random_state : int, default 0
        Seeds the per-tile samples of the left-looking variant; equal inputs give
        bit-identical factors. (The right-looking variant recompresses by QR and SVD and
        uses neither this nor `block_size`.)
    overwrite_a : bool, default False
        Release the tiles of `A` as soon as the factorization no longer needs them, which
        keeps the peak memory near the larger of `A` and its factor; the left-looking
        variant also factors the diagonal tiles in place (unless views of
        :meth:`~tlrcore.TLRMatrix.shared` or :meth:`~tlrcore.TLRMatrix.truncated` read
        them). `A` is consumed,
        whether the factorization succeeds or fails: any later use of it raises
        :class:`~tlrcore.ConsumedMatrixError`. Not with ``safeguard="shift"``, which may
        restart from `A`.
    variant : {"left", "right", "packed"}, optional
        ``"left"``: left-looking, every tile updated and compressed once by ARA
        (:mod:`tlrcore.cholesky.left`). ``"right"``: right-looking, the trailing tiles
        updated and recompressed by QR and SVD after every column
        (:mod:`tlrcore.cholesky.right`): slower and without safeguards, but with no random
        sampling, so an independent reference for the left-looking factor (it ignores
        `block_size` and `random_state`). ``"packed"``: left-looking on whole tile
        columns with batched kernels in the packed layout (:mod:`tlrcore.cholesky.packed`),
        the GPU algorithm, on any back end; every safeguard but ``"pivot"``. Default:
        ``"packed"`` if `A` is in the packed layout (built with ``method="batched"``, e.g.
        on a GPU), else ``"left"``. ``"batched"``, the former name of ``"packed"``, is
        deprecated.
    safeguard : None, str or sequence of str, default None
        What to do when the matrix is not positive definite at this accuracy (see
        :mod:`tlrcore.cholesky.safeguards`): ``"compensate"`` (always-on compensation of
        every diagonal tile, H2Opus sec. 5.1.1: the update's compression tail in diagonal
        rowsum form, and a lift of each nearly singular tile by the compression errors
        of its tile row, ``A.tile_errors``; changes positive definite input too, within
        ``||L L^T - A_tlr||_F <= (1 + sqrt(b / n_t) + 1.25 sqrt(b)) accuracy
        ||A_tlr||_F``), ``"compensate-block"`` (the same with the tail as a full block,
        ``1 + 1 / sqrt(n_t) + 1.25 sqrt(b)``; it perturbs less), ``"shift"`` (retry with
        the smallest sufficient diagonal shift, a power-of-two multiple of the tile
        tolerance), ``"schur"`` (Schur compensation of
        a failing tile only), ``"modified"`` (modified Cholesky on a failing diagonal
        tile), ``"pivot"`` (tile pivoting, :mod:`tlrcore.cholesky.pivoted`); combine as
        ``"compensate+modified"`` or ``("compensate", "shift")``. None raises.
    shift : float, default 0.0
        Added to every diagonal entry of `A` (which is not modified).

    Returns
    -------
    TLRCholesky or PackedCholesky
        (the latter from the packed variant, with arrays of `A`'s back end); both meet
        :class:`tlrcore.CholeskyFactor`. With
        ``.perturbation = ||E||_F`` (0.0 when nothing was changed),
        ``.perturbation_parts`` (``||.||_F`` by source: shift, compensation, lift, schur,
        modified), ``.shift``, ``.compensated_tiles``, ``.lifted_tiles``,
        ``.modified_tiles``, ``.backend`` and, with tile pivoting, ``.perm``.

    Raises
    ------
    TypeError
        If `A` is not a TLRMatrix.
    ConsumedMatrixError
        If `A` was consumed by an earlier ``cholesky(A, overwrite_a=True)``.
    ValueError
        If `accuracy` is not in (0, 1), `variant` is not ``"left"``, ``"right"`` or
        ``"packed"``, a safeguard name is unknown, `shift` is negative, or the combination
        of options is not supported.
    NotPositiveDefiniteError
        If an updated diagonal tile is not positive definite and the safeguards could not
        help; ``.tile`` is its index (its position in the factor, with tile pivoting).
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
    """Left-looking factorization with the safeguards; retries with a growing shift
    under ``"shift"``."""
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
                        f"diagonal tile {exc.tile} is not positive definite, and safeguard='shift' has no shift to "
                        "try: A is zero (||A||_F = 0), so the tile tolerance, the unit of its shifts, is 0 and no "
                        f"relative shift exists. {ZERO_MATRIX_HINT}",
                        tile=exc.tile,
                    ) from exc
                if len(extra) > 1:
                    raise NotPositiveDefiniteError(
                        f"{exc} The automatic shift reached {shift + added:.3g} ({added / tolerance:.0f} "
                        "tile tolerances), past the bound that guarantees success for a positive "
                        "semidefinite A; A is probably indefinite (use tlrcore.ldl).",
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
