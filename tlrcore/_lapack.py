"""BLAS and LAPACK calls that release the GIL, for the tile work run on threads.

SciPy's wrappers of ``dpotrf``, ``dtrsm`` and ``dsyrk`` hold the GIL for the whole call
(f2py releases it only for routines declared ``threadsafe`` [1]_). The same routines are
called here through the C function pointers of :mod:`scipy.linalg.cython_blas` and
:mod:`scipy.linalg.cython_lapack` via :mod:`ctypes`, which releases the GIL. Arrays are
Fortran-ordered, or blocks ``A[i0:i1, j0:j1]`` of such arrays, written in place; layout,
dtype and shapes are checked, as a wrong one would corrupt memory silently.

References
----------
.. [1] The SciPy developers, "Declare each function or subroutine from BLAS and LAPACK
   threadsafe (scipy.linalg)", https://github.com/scipy/scipy/issues/12436
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy.linalg import cython_blas, cython_lapack

__all__ = [
    "gemm_nt",
    "pack_lower",
    "potrf_lower",
    "symm_packed",
    "syrk_lower",
    "trmm_lower_transposed",
    "trmm_packed",
    "trsm_lower",
    "trsm_packed",
    "unpack_lower",
    "zero_strict_upper",
]

_int_p = ctypes.POINTER(ctypes.c_int)
_double_p = ctypes.POINTER(ctypes.c_double)
_char_p = ctypes.c_char_p


#: Argument types by letter in :func:`_function`'s signatures.
_ARGUMENT_TYPES = {"c": _char_p, "i": _int_p, "d": _double_p}


def _function(module, name, signature):
    """The ``nogil`` function `name` of the Cython module `module`, callable through
    :mod:`ctypes`; `signature` gives its arguments by letter: ``c`` a character, ``i`` an
    integer, ``d`` a double (scalar or array), all by pointer as Fortran passes them."""
    capsule = module.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    argtypes = [_ARGUMENT_TYPES[letter] for letter in signature]
    return ctypes.CFUNCTYPE(None, *argtypes)(get_pointer(capsule, get_name(capsule)))


_dpotrf = _function(cython_lapack, "dpotrf", "cidii")
_dlaset = _function(cython_lapack, "dlaset", "ciidddi")
_dtrttf = _function(cython_lapack, "dtrttf", "ccididi")
_dtfttr = _function(cython_lapack, "dtfttr", "cciddii")
_dtfsm = _function(cython_lapack, "dtfsm", "ccccciidddi")
_dtrsm = _function(cython_blas, "dtrsm", "cccciiddidi")
_dtrmm = _function(cython_blas, "dtrmm", "cccciiddidi")
_dsyrk = _function(cython_blas, "dsyrk", "cciiddiddi")
_dgemm = _function(cython_blas, "dgemm", "cciiiddididdi")
_dsymm = _function(cython_blas, "dsymm", "cciiddididdi")


def _column_major(a):
    """Whether `a` is 2-D with contiguous, non-overlapping columns (Fortran order or a block)."""
    rows, cols = a.shape
    if a.size == 0:
        return True
    unit_rows = rows <= 1 or a.strides[0] == a.itemsize
    return unit_rows and (
        cols <= 1 or (a.strides[1] % a.itemsize == 0 and a.strides[1] >= a.itemsize * rows)
    )


def _fortran(a, name, writeable=False):
    """Pointer to the column-major float64 matrix `a` and its leading dimension; ValueError for
    another layout or dtype (or a read-only `a` with `writeable`)."""
    if (
        a.dtype != np.float64
        or a.ndim != 2
        or not _column_major(a)
        or (writeable and not a.flags.writeable)
    ):
        raise ValueError(
            f"{name} must be a {'writeable ' if writeable else ''}Fortran-ordered 2-D float64 "
            "array or a block of one."
        )
    lda = a.strides[1] // a.itemsize if a.shape[1] > 1 else a.shape[0]
    return a.ctypes.data_as(_double_p), ctypes.byref(ctypes.c_int(max(1, lda)))


def _int(value):
    return ctypes.byref(ctypes.c_int(value))


def _double(value):
    return ctypes.byref(ctypes.c_double(value))


def potrf_lower(a, clean=True):
    """Cholesky factor ``L`` of `a` (``(n, n)``, Fortran order, float64) in its lower triangle,
    in place (LAPACK ``dpotrf``), the strict upper triangle zeroed with `clean`; returns
    ``info``: 0, or ``j > 0`` if the leading minor of order ``j`` is not positive definite."""
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"a must be square; got shape {a.shape}.")
    pointer, lda = _fortran(a, "a", writeable=True)
    info = ctypes.c_int(0)
    _dpotrf(b"L", _int(a.shape[0]), pointer, lda, ctypes.byref(info))
    if info.value < 0:
        raise ValueError(f"LAPACK dpotrf rejected argument {-info.value}.")
    if clean:
        zero_strict_upper(a)
    return info.value


def zero_strict_upper(F):
    """Zero the strict upper triangle of the Fortran-ordered `F` (or a block of one) in place.

    LAPACK ``dlaset`` on ``F[:, 1:]``, whose upper triangle is ``F``'s strict upper triangle:
    no mask is built, and the GIL is released once rather than per column."""
    pointer, lda = _fortran(F, "F", writeable=True)
    rows, cols = F.shape
    if rows < 1 or cols < 2:
        return
    above = ctypes.cast(ctypes.addressof(pointer.contents) + F.strides[1], _double_p)
    _dlaset(b"U", _int(rows), _int(cols - 1), _double(0.0), _double(0.0), above, lda)


def trsm_lower(L, B, trans=False, right=False):
    """``B <- L^{-1} B`` (``L^{-T} B`` with `trans`; with `right`, ``B L^{-1}`` or ``B L^{-T}``),
    in place (BLAS ``dtrsm``); returns `B`.

    `L` (float64) is read in its lower triangle, non-unit diagonal (a C-ordered `L` as its
    transpose's upper triangle). `B`, ``(n, m)`` or ``(n,)`` (``(m, n)`` with `right`), is
    Fortran- or C-ordered (solved as its transpose from the other side) or a block of a
    Fortran-ordered array."""
    axis = 1 if right else 0
    if (
        L.ndim != 2
        or L.shape[0] != L.shape[1]
        or B.ndim not in (1, 2)
        or B.shape[axis] != L.shape[0]
    ):
        raise ValueError(
            f"L must be square and B have as many {'columns' if right else 'rows'}; got shapes "
            f"{L.shape} and {B.shape}."
        )
    if B.size == 0:
        return B
    uplo, transposed = b"L", bool(trans)
    if not _column_major(L) and L.flags.c_contiguous:
        L, uplo, transposed = L.T, b"U", not transposed
    a, lda = _fortran(L, "L")
    work, right, transposed = _solve_operand(B, right, transposed)
    b, ldb = _fortran(work, "B", writeable=True)
    _dtrsm(
        b"R" if right else b"L",
        uplo,
        b"T" if transposed else b"N",
        b"N",
        _int(work.shape[0]),
        _int(work.shape[1]),
        _double(1.0),
        a,
        lda,
        b,
        ldb,
    )
    return B


def trmm_lower_transposed(L, B):
    """``B <- L^T B``, in place (BLAS ``dtrmm``), `L` (n x n, read in its lower triangle) and `B`
    (n x m) float64, Fortran-ordered or blocks of such arrays."""
    return _trmm_lower(L, B, b"T")


def trmm_lower(L, B):
    """``B <- L B``, in place (BLAS ``dtrmm``), as :func:`trmm_lower_transposed`."""
    return _trmm_lower(L, B, b"N")


def _trmm_lower(L, B, trans):
    if L.ndim != 2 or L.shape[0] != L.shape[1] or B.ndim != 2 or B.shape[0] != L.shape[0]:
        raise ValueError(
            f"L must be square and B have as many rows; got shapes {L.shape} and {B.shape}."
        )
    a, lda = _fortran(L, "L")
    b, ldb = _fortran(B, "B", writeable=True)
    if B.size:
        m, n = _int(B.shape[0]), _int(B.shape[1])
        _dtrmm(b"L", b"L", trans, b"N", m, n, _double(1.0), a, lda, b, ldb)
    return B


def gemm_nt(alpha, A, B, beta, C):
    """``C <- alpha A B^T + beta C``, in place (BLAS ``dgemm``), `A` (m x k), `B` (n x k) and `C`
    (m x n) float64, Fortran-ordered or blocks of such arrays."""
    if A.shape[1] != B.shape[1] or C.shape != (A.shape[0], B.shape[0]):
        raise ValueError(
            f"C must be {A.shape[0]} x {B.shape[0]} for A {A.shape} and B {B.shape}; got {C.shape}."
        )
    return _gemm(b"N", b"T", alpha, A, B, beta, C)


def _gemm(trans_a, trans_b, alpha, A, B, beta, C):
    """``C <- alpha op(A) op(B) + beta C`` (BLAS ``dgemm``), shapes already checked."""
    a, lda = _fortran(A, "A")
    b, ldb = _fortran(B, "B")
    c, ldc = _fortran(C, "C", writeable=True)
    inner = A.shape[0] if trans_a == b"T" else A.shape[1]
    if C.size:
        _dgemm(
            trans_a,
            trans_b,
            _int(C.shape[0]),
            _int(C.shape[1]),
            _int(inner),
            _double(alpha),
            a,
            lda,
            b,
            ldb,
            _double(beta),
            c,
            ldc,
        )
    return C


def syrk_lower(alpha, W, beta, C):
    """``C <- alpha W W^T + beta C`` in the lower triangle of `C`, in place (BLAS ``dsyrk``), `W`
    (n x k) and `C` (n x n) float64 in Fortran order."""
    if C.shape != (W.shape[0], W.shape[0]):
        raise ValueError(
            f"C must be {W.shape[0]} x {W.shape[0]} for W of shape {W.shape}; got {C.shape}."
        )
    w, ldw = _fortran(W, "W")
    c, ldc = _fortran(C, "C", writeable=True)
    if C.size:
        _dsyrk(
            b"L",
            b"N",
            _int(C.shape[0]),
            _int(W.shape[1]),
            _double(alpha),
            w,
            ldw,
            _double(beta),
            c,
            ldc,
        )
    return C


def _packed_operand(arf, n):
    """Pointer to the rectangular full packed array `arf` of an ``n x n`` triangle."""
    if arf.dtype != np.float64 or arf.ndim != 1 or arf.size != n * (n + 1) // 2:
        raise ValueError(
            f"arf must hold the {n * (n + 1) // 2} float64 entries of an {n} x {n} triangle; "
            f"got shape {arf.shape} and dtype {arf.dtype}."
        )
    if not arf.flags.c_contiguous:
        raise ValueError("arf must be contiguous.")
    return arf.ctypes.data_as(_double_p)


def pack_lower(a, out=None):
    """The lower triangle of the square `a` (Fortran order or a block of one) in rectangular full
    packed form (LAPACK ``dtrttf``, ``TRANSR = 'N'``): ``n (n + 1) / 2`` entries, into `out`."""
    n = a.shape[0]
    if a.ndim != 2 or a.shape[1] != n:
        raise ValueError(f"a must be square; got shape {a.shape}.")
    pointer, lda = _fortran(a, "a")
    out = np.empty(n * (n + 1) // 2) if out is None else out
    info = ctypes.c_int(0)
    if n:
        _dtrttf(b"N", b"L", _int(n), pointer, lda, _packed_operand(out, n), ctypes.byref(info))
    return out


def unpack_lower(arf, out):
    """Write the triangle packed by :func:`pack_lower` into the lower triangle of the square,
    Fortran-ordered `out` (LAPACK ``dtfttr``); the strict upper triangle is left as it was.
    Returns `out`."""
    n = out.shape[0]
    if out.ndim != 2 or out.shape[1] != n:
        raise ValueError(f"out must be square; got shape {out.shape}.")
    pointer, lda = _fortran(out, "out", writeable=True)
    info = ctypes.c_int(0)
    if n:
        _dtfttr(b"N", b"L", _int(n), _packed_operand(arf, n), pointer, lda, ctypes.byref(info))
    return out


def _solve_operand(B, right, transposed):
    """`B` as a column-major matrix for a triangular solve, with the side (`right`) and the
    transposition that solve it: a C-ordered `B` is solved as its transpose from the other
    side."""
    work = B.reshape(B.shape[0], -1)
    if not _column_major(work) and work.flags.c_contiguous:
        return work.T, not right, not transposed
    return work, right, transposed


def trsm_packed(arf, B, trans=False):
    """``B <- L^{-1} B`` (``L^{-T} B`` with `trans`) in place (LAPACK ``dtfsm``), ``L`` the lower
    triangle packed by :func:`pack_lower`, non-unit diagonal; `B` ``(n, m)`` or ``(n,)``,
    Fortran- or C-ordered (solved as its transpose from the right), or a block of a
    Fortran-ordered array. Returns `B`."""
    n = B.shape[0]
    a = _packed_operand(arf, n)
    if B.size == 0:
        return B
    work, right, transposed = _solve_operand(B, False, bool(trans))
    b, ldb = _fortran(work, "B", writeable=True)
    _dtfsm(
        b"N",
        b"R" if right else b"L",
        b"L",
        b"T" if transposed else b"N",
        b"N",
        _int(work.shape[0]),
        _int(work.shape[1]),
        _double(1.0),
        a,
        b,
        ldb,
    )
    return B


def _packed_blocks(arf, n):
    """The blocks of the rectangular full packed array `arf` of an ``n x n`` lower triangle
    ``T``: ``(h, T11, T21, T22)``, column-major views in which ``T[:h, :h]`` is the lower
    triangle of ``T11``, ``T21 = T[h:, :h]``, and ``T[h:, h:]`` is the transpose of the upper
    triangle of ``T22`` (the layout of :func:`tlrcore.dense.triangles._unpack_blocks`)."""
    _packed_operand(arf, n)
    if n % 2 == 0:
        h = n // 2
        R = arf.reshape(h, n + 1).T
        return h, R[1 : h + 1], R[h + 1 :], R[:h]
    h = (n + 1) // 2
    R = arf.reshape(h, n).T
    return h, R[:h], R[h:], R[: n - h, 1:]


def symm_packed(arf, X):
    """``S X`` for the symmetric ``S`` whose lower triangle :func:`pack_lower` packed into `arf`,
    and `X` ``(n,)`` or ``(n, m)``: a new array of `X`'s memory order, read from the packed
    blocks in place (:func:`_packed_blocks`): ``S X = [S11 X1 + S21^T X2; S21 X1 + S22 X2]``
    is two ``dsymm`` and two ``dgemm`` (for a C-ordered `X`, the same on the transposes:
    ``X^T S``)."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    h, S11, S21, S22 = _packed_blocks(arf, n)
    if X.ndim == 2 and X.flags.c_contiguous and not X.flags.f_contiguous:
        W = X.T
        out = np.empty(W.shape, order="F")
        W1, W2, Y1, Y2 = W[:, :h], W[:, h:], out[:, :h], out[:, h:]
        _symm(b"R", b"L", S11, W1, 0.0, Y1)
        if n > h:
            _gemm(b"N", b"N", 1.0, W2, S21, 1.0, Y1)
            _gemm(b"N", b"T", 1.0, W1, S21, 0.0, Y2)
            _symm(b"R", b"U", S22, W2, 1.0, Y2)
        return out.T
    operand = np.asfortranarray(X.reshape(n, -1))
    out = np.empty(operand.shape, order="F")
    X1, X2, Y1, Y2 = operand[:h], operand[h:], out[:h], out[h:]
    _symm(b"L", b"L", S11, X1, 0.0, Y1)
    if n > h:
        _gemm(b"T", b"N", 1.0, S21, X2, 1.0, Y1)
        _gemm(b"N", b"N", 1.0, S21, X1, 0.0, Y2)
        _symm(b"L", b"U", S22, X2, 1.0, Y2)
    return out.reshape(X.shape)


def trmm_packed(arf, X):
    """``L X`` for the lower-triangular ``L`` that :func:`pack_lower` packed into `arf`, and
    `X` ``(n,)`` or ``(n, m)``: a new array of `X`'s memory order, read from the packed
    blocks in place (:func:`_packed_blocks`): ``L X = [L11 X1; L21 X1 + L22 X2]`` is two
    ``dtrmm`` and one ``dgemm`` (for a C-ordered `X`, the same on the transposes:
    ``X^T L^T``), half the flops of a product with the unpacked tile."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    h, L11, L21, L22t = _packed_blocks(arf, n)
    if X.ndim == 2 and X.flags.c_contiguous and not X.flags.f_contiguous:
        W = X.T
        out = np.array(W, order="F")
        W1, Y1, Y2 = W[:, :h], out[:, :h], out[:, h:]
        _trmm(b"R", b"L", b"T", L11, Y1)
        if n > h:
            _trmm(b"R", b"U", b"N", L22t, Y2)
            _gemm(b"N", b"T", 1.0, W1, L21, 1.0, Y2)
        return out.T
    operand = np.asfortranarray(X.reshape(n, -1))
    out = np.array(operand, order="F")
    X1, Y1, Y2 = operand[:h], out[:h], out[h:]
    _trmm(b"L", b"L", b"N", L11, Y1)
    if n > h:
        _trmm(b"L", b"U", b"T", L22t, Y2)
        _gemm(b"N", b"N", 1.0, L21, X1, 1.0, Y2)
    return out.reshape(X.shape)


def _trmm(side, uplo, trans, A, B):
    """``B <- op(A) B`` (`side` ``b"L"``) or ``B <- B op(A)`` (``b"R"``) in place for the
    triangular ``A`` held in its `uplo` triangle, non-unit diagonal (BLAS ``dtrmm``)."""
    a, lda = _fortran(A, "A")
    b, ldb = _fortran(B, "B", writeable=True)
    if B.size:
        m, n = _int(B.shape[0]), _int(B.shape[1])
        _dtrmm(side, uplo, trans, b"N", m, n, _double(1.0), a, lda, b, ldb)
    return B


def _symm(side, uplo, A, B, beta, C):
    """``C <- A B + beta C`` (`side` ``b"L"``) or ``C <- B A + beta C`` (``b"R"``) for the
    symmetric ``A`` held in its `uplo` triangle (BLAS ``dsymm``)."""
    a, lda = _fortran(A, "A")
    b, ldb = _fortran(B, "B")
    c, ldc = _fortran(C, "C", writeable=True)
    if C.size:
        _dsymm(
            side,
            uplo,
            _int(C.shape[0]),
            _int(C.shape[1]),
            _double(1.0),
            a,
            lda,
            b,
            ldb,
            _double(beta),
            c,
            ldc,
        )
    return C
