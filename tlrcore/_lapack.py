r"""BLAS and LAPACK calls that release the GIL, for the tile work run on threads.

SciPy's Python wrappers of ``dpotrf``, ``dtrsm``, ``dsyrk`` and the triangular solves
built on them (``scipy.linalg.solve_triangular``, ``scipy.linalg.lapack.dpotrf``,
``scipy.linalg.blas.dsyrk``) hold the GIL for the whole call (f2py releases it only for
routines declared ``threadsafe``; scipy/scipy#12436). On two cores, two threads calling
them take as long as one thread calling them twice, so a tile pool that spends half its
time in them gains little from its threads. The same routines are reached here through
the C function pointers of :mod:`scipy.linalg.cython_blas` and
:mod:`scipy.linalg.cython_lapack` (``nogil`` functions, the very BLAS and LAPACK SciPy
links), called through :mod:`ctypes`, which releases the GIL for the call.

Arrays are passed in Fortran order (or as column-major views of a larger Fortran-ordered
array: a block ``A[i0:i1, j0:j1]``, whose leading dimension is read off its strides) and
written in place; the functions check the layout, the dtype and the shapes they rely on
(a wrong one would be silent memory corruption, not an exception).
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy.linalg import cython_blas, cython_lapack

__all__ = [
    "gemm_nt",
    "potrf_lower",
    "syrk_lower",
    "trmm_lower_transposed",
    "trsm_lower",
    "zero_strict_upper",
]

_int_p = ctypes.POINTER(ctypes.c_int)
_double_p = ctypes.POINTER(ctypes.c_double)
_char_p = ctypes.c_char_p


def _function(module, name, *argtypes):
    """The ``nogil`` function `name` of the Cython module `module`, callable through
    :mod:`ctypes` (which releases the GIL while it runs)."""
    capsule = module.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.CFUNCTYPE(None, *argtypes)(get_pointer(capsule, get_name(capsule)))


_dpotrf = _function(cython_lapack, "dpotrf", _char_p, _int_p, _double_p, _int_p, _int_p)
_dtrsm = _function(
    cython_blas,
    "dtrsm",
    _char_p,
    _char_p,
    _char_p,
    _char_p,
    _int_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
    _double_p,
    _int_p,
)
_dsyrk = _function(
    cython_blas,
    "dsyrk",
    _char_p,
    _char_p,
    _int_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
)
_dgemm = _function(
    cython_blas,
    "dgemm",
    _char_p,
    _char_p,
    _int_p,
    _int_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
    _double_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
)
_dlaset = _function(
    cython_lapack, "dlaset", _char_p, _int_p, _int_p, _double_p, _double_p, _double_p, _int_p
)
_dtrmm = _function(
    cython_blas,
    "dtrmm",
    _char_p,
    _char_p,
    _char_p,
    _char_p,
    _int_p,
    _int_p,
    _double_p,
    _double_p,
    _int_p,
    _double_p,
    _int_p,
)


def _column_major(a):
    """Whether `a` is a 2-D array whose columns are contiguous and do not overlap: a
    Fortran-ordered array or a block of one."""
    rows, cols = a.shape
    if a.size == 0:
        return True
    unit_rows = rows <= 1 or a.strides[0] == a.itemsize
    return unit_rows and (
        cols <= 1 or (a.strides[1] % a.itemsize == 0 and a.strides[1] >= a.itemsize * rows)
    )


def _fortran(a, name, writeable=False):
    """The pointer to the column-major float64 matrix `a` (Fortran-ordered, or a block of
    such an array) and its leading dimension."""
    if (
        a.dtype != np.float64
        or a.ndim != 2
        or not _column_major(a)
        or (writeable and not a.flags.writeable)
    ):
        raise ValueError(
            f"{name} must be a {'writeable ' if writeable else ''}Fortran-ordered 2-D float64 array "
            "or a block of one."
        )
    lda = a.strides[1] // a.itemsize if a.shape[1] > 1 else a.shape[0]
    return a.ctypes.data_as(_double_p), ctypes.byref(ctypes.c_int(max(1, lda)))


def _int(value):
    return ctypes.byref(ctypes.c_int(value))


def _double(value):
    return ctypes.byref(ctypes.c_double(value))


def potrf_lower(a, clean=True):
    """Cholesky factor ``L`` of `a` in its lower triangle, in place (LAPACK ``dpotrf``).

    Parameters
    ----------
    a : ndarray of shape (n, n), Fortran order, float64
        Read in its lower triangle; overwritten by ``L`` there.
    clean : bool, default True
        Zero the strict upper triangle (else it keeps the matrix's values).

    Returns
    -------
    info : int
        0 on success; ``j > 0`` if the leading minor of order ``j`` is not positive
        definite (the factorization stopped there).
    """
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

    LAPACK ``dlaset`` on the block ``F[:, 1:]``, whose upper triangle (its diagonal
    included) is the strict upper triangle of ``F``: it writes only those entries, and
    releases the GIL. A masked NumPy assignment built an ``m x n`` mask every call (``np.tri``;
    about 1.5 % of the factorization of 8,192 co2 cells), and a loop of slice assignments
    re-acquires the GIL once per column, which beside threads busy in Python costs up to a
    switch interval each (0.6 s instead of 4 ms for 2,500 columns, measured).
    """
    pointer, lda = _fortran(F, "F", writeable=True)
    rows, cols = F.shape
    if rows < 1 or cols < 2:
        return
    above = ctypes.cast(ctypes.addressof(pointer.contents) + F.strides[1], _double_p)
    _dlaset(b"U", _int(rows), _int(cols - 1), _double(0.0), _double(0.0), above, lda)


def trsm_lower(L, B, trans=False, right=False):
    """``B <- L^{-1} B`` (or ``L^{-T} B`` with `trans`; with `right`, ``B L^{-1}`` or
    ``B L^{-T}``), in place (BLAS ``dtrsm``).

    Parameters
    ----------
    L : ndarray of shape (n, n), float64
        Read in its lower triangle (non-unit diagonal). A C-ordered `L` is read as the
        upper triangle of its Fortran-ordered transpose, at no copy; a block of a
        Fortran-ordered array is read in place.
    B : ndarray of shape (n, m) or (n,) (with `right`: (m, n)), float64
        Right-hand sides, Fortran- or C-ordered, or a block of a Fortran-ordered array;
        overwritten by the solution. A C-ordered ``B`` is solved as its Fortran-ordered
        transpose from the other side: ``op(L) X = B`` is ``X^T op(L)^T = B^T``.
    trans, right : bool, default False

    Returns
    -------
    B : ndarray
    """
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
    work = B.reshape(B.shape[0], -1)
    if not _column_major(work) and work.flags.c_contiguous:
        work, right, transposed = work.T, not right, not transposed
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
    """``B <- L^T B``, in place (BLAS ``dtrmm``).

    Parameters
    ----------
    L : ndarray of shape (n, n), float64
        Fortran-ordered or a block of such an array; read in its lower triangle.
    B : ndarray of shape (n, m), float64
        Fortran-ordered or a block of such an array; overwritten.

    Returns
    -------
    B : ndarray
    """
    if L.ndim != 2 or L.shape[0] != L.shape[1] or B.ndim != 2 or B.shape[0] != L.shape[0]:
        raise ValueError(
            f"L must be square and B have as many rows; got shapes {L.shape} and {B.shape}."
        )
    a, lda = _fortran(L, "L")
    b, ldb = _fortran(B, "B", writeable=True)
    if B.size:
        _dtrmm(
            b"L", b"L", b"T", b"N", _int(B.shape[0]), _int(B.shape[1]), _double(1.0), a, lda, b, ldb
        )
    return B


def gemm_nt(alpha, A, B, beta, C):
    """``C <- alpha A B^T + beta C``, in place (BLAS ``dgemm``).

    Parameters
    ----------
    alpha, beta : float
    A : ndarray of shape (m, k)
    B : ndarray of shape (n, k)
    C : ndarray of shape (m, n)
        Each float64, Fortran-ordered or a block of such an array; `C` is overwritten.

    Returns
    -------
    C : ndarray
    """
    if A.shape[1] != B.shape[1] or C.shape != (A.shape[0], B.shape[0]):
        raise ValueError(
            f"C must be {A.shape[0]} x {B.shape[0]} for A {A.shape} and B {B.shape}; got {C.shape}."
        )
    a, lda = _fortran(A, "A")
    b, ldb = _fortran(B, "B")
    c, ldc = _fortran(C, "C", writeable=True)
    if C.size:
        _dgemm(
            b"N",
            b"T",
            _int(C.shape[0]),
            _int(C.shape[1]),
            _int(A.shape[1]),
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
    """``C <- alpha W W^T + beta C`` in the lower triangle of `C`, in place (BLAS ``dsyrk``).

    Parameters
    ----------
    alpha, beta : float
    W : ndarray of shape (n, k), Fortran order, float64
    C : ndarray of shape (n, n), Fortran order, float64

    Returns
    -------
    C : ndarray
    """
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
