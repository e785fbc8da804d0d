"""Abstract correlation kernel and the shared evaluation machinery.

A kernel describes the correlation function ``M`` of a stationary isotropic
Gaussian process. The covariance between two sites at distance ``h`` is::

    C(h) = variance * M(h / range) + nugget * [h == 0]

:class:`Kernel` holds everything that is common to the families: validation of the
shape parameters and of the call arguments, the bookkeeping of fixed versus free
(estimated) shape parameters, the chain rule for the derivative with respect to
``range``, and the chunked, threaded evaluation of large distance arrays.

A subclass writes its formula once, in :meth:`Kernel._formula`: ``M(u)`` on the scaled
distance ``u = d / range``, ``u * dM/du`` and ``dM/dshape``, with the operations of the
array module ``xp`` of the distances only (NumPy, or CuPy for arrays on a GPU), so the
same code serves every back end. :meth:`Kernel.correlation` and
:meth:`Kernel.correlation_and_gradient` validate their arguments;
:meth:`Kernel.evaluate` is the trusted path of the likelihoods (no reduction or host
synchronization per call).

Chunked evaluation
------------------
How an array is cut into chunks is a strategy of the array module, chosen by the
namespace of the distances (:data:`_CHUNKING`), never by a branch in the formulas.
NumPy arrays with more than ``_PARALLEL_MIN_SIZE`` entries are cut into chunks of
``_CHUNK_SIZE`` entries that a small module-level thread pool evaluates
(``scipy.special`` and the NumPy ufuncs release the GIL); the pool has
``min(2, os.cpu_count())`` workers unless the environment variable
``GEOSTAT_KERNEL_THREADS`` or :func:`set_num_threads` says otherwise. Arrays of other
modules (a GPU's) are evaluated in chunks of :data:`DEVICE_CHUNK` entries, which bound
the temporaries. Results do not depend on the chunking: every formula is elementwise.

The pool serves the main thread of a process that was not forked only. Calls from other
threads (a TLR build's tile pool, Dask's threads, the pool's own) and from forked worker
processes evaluate their chunks one after the other in the caller, whose own parallelism
already keeps the cores busy.
"""

from __future__ import annotations

import abc
import concurrent.futures
import copy
import importlib
import inspect
import logging
import math
import numbers
import os
import threading
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEVICE_CHUNK",
    "Kernel",
    "array_namespace",
    "check_in_domain",
    "get_num_threads",
    "map_chunks",
    "set_num_threads",
]

logger = logging.getLogger(__name__)

# Arrays with more entries than this are evaluated chunk by chunk.
_PARALLEL_MIN_SIZE = 100_000
# Entries per chunk: large enough to amortize dispatch, small enough for the cache.
_CHUNK_SIZE = 32_768
#: Entries per chunk of the evaluation of arrays other than NumPy's (a GPU's): each
#: temporary of a chunk takes 128 MiB, a whole tile column or matrix takes many chunks.
DEVICE_CHUNK = 1 << 24
_THREADS_ENV = "GEOSTAT_KERNEL_THREADS"

_pool_lock = threading.Lock()
_pool = None


def _cpu_count():
    return max(1, os.cpu_count() or 1)


def _check_num_threads(n, argname):
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{argname} must be a positive integer, got {n!r}.")
    if n < 1:
        raise ValueError(f"{argname} must be a positive integer, got {n}.")
    return min(int(n), _cpu_count())


def _default_num_threads():
    value = os.environ.get(_THREADS_ENV)
    if value is None:
        return min(2, _cpu_count())
    try:
        return _check_num_threads(int(value), _THREADS_ENV)
    except (TypeError, ValueError):
        raise ValueError(
            f"Environment variable {_THREADS_ENV}={value!r} must be a positive integer; "
            "unset it to use the default of 2 threads."
        ) from None


_num_threads = _default_num_threads()


def get_num_threads():
    """Return the number of threads used to evaluate large distance arrays (from the main
    thread of a process that was not forked; elsewhere one).

    Returns
    -------
    int
        Worker threads of the kernel thread pool (1 means serial evaluation).
    """
    return _num_threads


def set_num_threads(n):
    """Set the number of threads used to evaluate large distance arrays (from the main
    thread of a process that was not forked; elsewhere one).

    Parameters
    ----------
    n : int
        Number of worker threads, at least 1; values above ``os.cpu_count()`` are
        reduced to it. ``1`` evaluates serially.

    Returns
    -------
    int
        The previous setting, so that it can be restored.
    """
    global _num_threads, _pool
    n = _check_num_threads(n, "n")
    with _pool_lock:
        previous = _num_threads
        if n != _num_threads and _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None
        _num_threads = n
    logger.debug("geostat kernels now use %d thread(s)", n)
    return previous


def _get_pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=_num_threads, thread_name_prefix="geostat-kernel"
            )
        return _pool


def _forget_pool_after_fork():
    # A forked child inherits the pool object but not its threads; it evaluates serially
    # (see _pool_serves_here).
    global _pool, _pool_lock, _forked
    _pool = None
    _pool_lock = threading.Lock()
    _forked = True


_forked = False
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool_serves_here():
    """Whether the kernel pool takes the chunks of this call: only in the main thread of a
    process that was not forked (see the module docstring)."""
    return not _forked and threading.current_thread() is threading.main_thread()


def _for_chunks(func, size):
    """Call ``func(start, stop)`` on consecutive slices covering ``range(size)``.

    Small arrays are done in one call. Large ones are cut into chunks of
    ``_CHUNK_SIZE`` entries, run on the thread pool when it has more than one worker and
    :func:`_pool_serves_here`, and serially, chunk by chunk, otherwise (the pool's own
    threads included).
    """
    if size <= _PARALLEL_MIN_SIZE:
        func(0, size)
        return
    bounds = [(s, min(s + _CHUNK_SIZE, size)) for s in range(0, size, _CHUNK_SIZE)]
    if _num_threads <= 1 or not _pool_serves_here():
        for start, stop in bounds:
            func(start, stop)
        return
    pool = _get_pool()
    futures = [pool.submit(func, s, e) for s, e in bounds]
    for future in futures:
        future.result()


def array_namespace(x):
    """The array module of `x`: ``numpy`` for NumPy arrays, Python scalars and sequences,
    else the top-level package that defines its type (``cupy`` for ``cupy.ndarray``)."""
    if isinstance(x, (np.ndarray, np.generic, numbers.Number, list, tuple)):
        return np
    return importlib.import_module(type(x).__module__.partition(".")[0])


def _writeable(a):
    """Whether `a` may be written: NumPy's flag; CuPy's flags have none (its arrays always are)."""
    return getattr(a.flags, "writeable", True)


def _threaded(formula, u, names, xp, out=None):
    """NumPy: the whole array at once when small, else chunks on the thread pool written
    into preallocated outputs (the values into `out` when given, which may be `u`)."""
    if u.size <= _PARALLEL_MIN_SIZE:
        return formula(u, names)
    return _into_outputs(formula, u, names, np.empty, out, _for_chunks)


def _bounded(formula, u, names, xp, out=None):
    """Other array modules: chunks of :data:`DEVICE_CHUNK` entries one after the other
    (the temporaries of one chunk at a time; the values into `out` when given, which may
    be `u`)."""
    if u.size <= DEVICE_CHUNK:
        return formula(u, names)
    return _into_outputs(formula, u, names, xp.empty, out, _device_chunks)


def _into_outputs(formula, u, names, empty, out, loop):
    """`formula` of the chunks of `u` that ``loop(work, u.size)`` visits, written into
    outputs made by `empty` (the values into `out` when given)."""
    m = empty(u.size) if out is None else out
    u_dm_du = None if names is None else empty(u.size)
    dshape = {name: empty(u.size) for name in names or ()}

    def work(start, stop):
        part = slice(start, stop)
        m[part], u_dm_du_part, dshape_part = formula(u[part], names)
        if names is not None:
            u_dm_du[part] = u_dm_du_part
            for name in names:
                dshape[name][part] = dshape_part[name]

    loop(work, u.size)
    return m, u_dm_du, dshape


def _device_chunks(func, size):
    """Call ``func(start, stop)`` on consecutive slices of :data:`DEVICE_CHUNK` entries
    covering ``range(size)``, one after the other."""
    for start in range(0, size, DEVICE_CHUNK):
        func(start, min(start + DEVICE_CHUNK, size))


def map_chunks(func, x, out):
    """``out[part] = func(x[part])`` over consecutive parts of the 1-D arrays `x` and `out`
    (which may be `x`), for an elementwise `func`.

    NumPy arrays go in chunks of ``_CHUNK_SIZE`` entries on the kernel thread pool, as the
    formulas (:func:`_for_chunks`), so that every temporary of `func` stays in the cache
    instead of being a fresh array of `x`'s size (whose memory the system zeroes at its
    first touch); other modules' arrays go in chunks of :data:`DEVICE_CHUNK` entries.

    Returns
    -------
    out
    """

    def work(start, stop):
        out[start:stop] = func(x[start:stop])

    _CHUNK_LOOPS.get(array_namespace(x).__name__, _device_chunks)(work, x.size)
    return out


#: Chunking strategy by array module (module name); others use :func:`_bounded`.
_CHUNKING = {"numpy": _threaded}
#: Loop over chunks of :func:`map_chunks` by array module; others use :func:`_device_chunks`.
_CHUNK_LOOPS = {"numpy": _for_chunks}


def _check_real(value, argname):
    """Return ``value`` as a Python float; TypeError unless it is a real scalar."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.ndarray)):
        raise TypeError(f"{argname} must be a real number, got {type(value).__name__}: {value!r}.")
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "iuf":
            raise TypeError(
                f"{argname} must be a real scalar, got an array of shape {value.shape}."
            )
        value = value[()]
    return float(value)


def check_in_domain(key, value, domain, argname=None):
    """`value` as a float, validated against ``domain = (low, high, high_inclusive)``
    (low excluded); ValueError or TypeError naming `argname` (default `key`)."""
    argname = argname or key
    value = _check_real(value, argname)
    low, high, high_inclusive = domain
    upper_ok = value <= high if high_inclusive else value < high
    if not (math.isfinite(value) and value > low and upper_ok):
        closing = "]" if high_inclusive else ")"
        raise ValueError(
            f"{argname} must be finite and in ({low:g}, {high:g}{closing}, got {value!r}."
        )
    return value


class Kernel(abc.ABC):
    """Abstract isotropic correlation function ``M(d / range)``.

    Subclasses set the class attributes below and implement :meth:`_formula`.

    Parameters
    ----------
    shape : dict, optional
        Value of each shape parameter, keyed by name; ``None`` marks it as free
        (to be estimated). Missing names are free.
    bounds : dict, optional
        Estimation bounds overriding the defaults, ``{name: (low, high)}``.

    Attributes
    ----------
    name : str
        Family name, as accepted by :func:`geostat.kernels.get_kernel`.
    """

    name: str = ""
    #: Shape parameters of the family, in order.
    _SHAPE_NAMES: tuple[str, ...] = ()
    #: ``{name: (low, high, high_inclusive)}``: admissible values (low excluded).
    _SHAPE_DOMAIN: dict[str, tuple[float, float, bool]] = {}
    _DEFAULT_BOUNDS: dict[str, tuple[float, float]] = {}
    _DEFAULT_START: dict[str, float] = {}
    #: Shape parameters searched on their natural scale (the others on a log scale).
    _LINEAR_SHAPE: tuple[str, ...] = ()
    #: Whether the correlation is a function of coordinate differences
    #: (:class:`geostat.kernels.lags.LagKernel`) rather than of the distance.
    structured = False
    #: Whether the model is geometrically anisotropic (measured in a tangent plane on
    #: longitude/latitude).
    anisotropic = False
    #: Whether the last coordinate is time (:class:`geostat.kernels.space_time.SpaceTime`).
    time_axis = False

    def __init__(
        self,
        shape: Mapping[str, float | None] | None = None,
        bounds: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        shape = {} if shape is None else dict(shape)
        unknown = set(shape) - set(self._SHAPE_NAMES)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no shape parameter {sorted(unknown)}.")
        self._shape = {
            key: None if shape.get(key) is None else self._check_shape_value(key, shape[key])
            for key in self._SHAPE_NAMES
        }
        self._bounds = self._check_bounds(bounds)

    # ------------------------------------------------------------------ validation
    @classmethod
    def _check_shape_value(cls, key, value, argname=None):
        """Validate one shape parameter value and return it as a float."""
        return check_in_domain(key, value, cls._SHAPE_DOMAIN[key], argname)

    def _check_bounds(self, bounds):
        merged = {key: tuple(self._DEFAULT_BOUNDS[key]) for key in self._SHAPE_NAMES}
        if bounds is None:
            return merged
        if not isinstance(bounds, dict):
            raise TypeError(
                f"bounds must be a dict {{name: (low, high)}}, got {type(bounds).__name__}."
            )
        for key, pair in bounds.items():
            if key not in self._SHAPE_NAMES:
                raise ValueError(
                    f"bounds has an unknown key {key!r}; {type(self).__name__} shape "
                    f"parameters are {list(self._SHAPE_NAMES)}."
                )
            if not isinstance(pair, (tuple, list, np.ndarray)) or len(pair) != 2:
                raise TypeError(f"bounds[{key!r}] must be a pair (low, high), got {pair!r}.")
            low = self._check_shape_value(key, pair[0], f"bounds[{key!r}][0]")
            high = self._check_shape_value(key, pair[1], f"bounds[{key!r}][1]")
            if not low < high:
                raise ValueError(
                    f"bounds[{key!r}] must satisfy low < high, got ({low!r}, {high!r})."
                )
            merged[key] = (low, high)
        return merged

    def resolve_shape(self, given: Mapping[str, float | None]) -> dict[str, float]:
        """Shape values for one call: the given ones, else the fixed ones (validated)."""
        unknown = set(given) - set(self._SHAPE_NAMES)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected shape argument(s) {sorted(unknown)}; "
                f"its shape parameters are {list(self._SHAPE_NAMES)}."
            )
        values = {}
        for key in self._SHAPE_NAMES:
            value = given.get(key, self._shape[key])
            if value is None:
                raise ValueError(
                    f"{key} is a free parameter of {self!r}: pass {key}=<value> to evaluate it."
                )
            values[key] = self._check_shape_value(key, value)
        return values

    @staticmethod
    def _prepare(d, range):
        """Validated ``(d, range)``: `d` a float64 array of its own module."""
        xp = array_namespace(d)
        try:
            d = xp.asarray(d)
            if d.dtype.kind not in "iuf":
                raise TypeError
            d = d.astype(xp.float64, copy=False)
        except (TypeError, ValueError):
            raise TypeError(
                "d must be an array of real, non-negative distances, got "
                f"{type(d).__name__} of dtype {getattr(d, 'dtype', None)}."
            ) from None
        rng = _check_real(range, "range")
        if not (math.isfinite(rng) and rng > 0):
            raise ValueError(f"range must be finite and > 0, got {rng!r}.")
        if d.size:
            d_min, d_max = float(d.min()), float(d.max())
            if not (d_min >= 0 and math.isfinite(d_max)):
                raise ValueError(
                    "d must contain finite, non-negative distances; "
                    f"found values in [{d_min!r}, {d_max!r}]. Check the coordinates for NaN."
                )
            if not math.isfinite(d_max / rng):
                raise ValueError(f"d / range overflows (max d={d_max!r}, range={rng!r}); rescale.")
        return d, rng

    # ------------------------------------------------------------------ evaluation
    def correlation(self, d: ArrayLike, range: float, **shape: float) -> NDArray[np.float64]:
        """Evaluate the correlation ``M(d / range)``.

        Parameters
        ----------
        d : array_like of float
            Non-negative distances, any shape (a condensed ``pdist`` vector or a
            matrix), of any array module (NumPy, CuPy): the result is of the same.
        range : float
            Range parameter, > 0, in the units of ``d``.
        **shape : float
            Shape parameter values. Free parameters must be given; fixed ones default
            to their fixed values (a given value overrides them).

        Returns
        -------
        array of float
            ``M(d / range)`` with the shape of ``d``; ``M(0) = 1``.

        Raises
        ------
        TypeError
            For non-numeric arguments or unknown shape names.
        ValueError
            For negative or non-finite distances, ``range <= 0``, a missing free
            shape parameter or a shape value outside its domain.
        """
        d, rng = self._prepare(d, range)
        return self.evaluate(d, rng, self.resolve_shape(shape))[0]

    def correlation_and_gradient(
        self, d: ArrayLike, range: float, **shape: float
    ) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
        """Evaluate the correlation and its derivatives with respect to the parameters.

        Parameters
        ----------
        d : array_like of float
            Non-negative distances, any shape, of any array module.
        range : float
            Range parameter, > 0.
        **shape : float
            Shape parameter values, as in :meth:`correlation`.

        Returns
        -------
        m : array of float
            ``M(d / range)``, shape of ``d``.
        grads : dict of str to array
            ``"range"``: ``dM/drange``; and for each name in :attr:`free_shape`,
            ``dM/d<name>``. Each has the shape of ``d``.
        """
        d, rng = self._prepare(d, range)
        return self.evaluate(d, rng, self.resolve_shape(shape), gradient=True)

    def evaluate(self, d, range_, shape, gradient=False, overwrite_d=False):
        """The correlation (and gradient) without validation: the likelihoods' path.

        Parameters
        ----------
        d : array of float64
            Distances of any array module, trusted to be finite and non-negative (they
            come from validated coordinates): nothing is checked, which would cost a
            reduction (and, on a GPU, a host synchronization) per call.
        range_ : float
            Range, > 0.
        shape : dict
            Every shape parameter's value, as :meth:`resolve_shape` returns them.
        gradient : bool or tuple of str, default False
            True for the derivatives with respect to the range and every free shape
            parameter; a non-empty tuple for those of its names only (the range's always comes:
            it costs nothing beyond the others, while a shape derivative such as the
            Matérn smoothness's can cost many times the correlation).
        overwrite_d : bool, default False
            Without `gradient`, let the correlation overwrite `d` (when C-contiguous and
            writeable) where it is large, instead of two temporaries of its size: fresh
            memory is zeroed by the system at its first touch, which can cost more than a
            cheap formula itself.

        Returns
        -------
        m : array
            ``M(d / range)`` with the shape and module of `d`.
        grads : dict of str to array
            Empty unless `gradient`; then ``"range"`` and the free shape parameters asked
            for, as in :meth:`correlation_and_gradient`.
        """
        xp = array_namespace(d)
        in_place = overwrite_d and not gradient and d.flags.c_contiguous and _writeable(d)
        if in_place:
            u = d.reshape(-1)
            u /= range_
        else:
            u = d.reshape(-1) / range_
        if not gradient:
            names = None
        elif gradient is True:
            names = self.free_shape
        else:
            names = tuple(n for n in self.free_shape if n in gradient)
        chunking = _CHUNKING.get(xp.__name__, _bounded)
        m, u_dm_du, dshape = chunking(
            lambda part, which: self._formula(part, shape, xp, which),
            u,
            names,
            xp,
            u if in_place else None,
        )
        if not gradient:
            return m.reshape(d.shape), {}
        u_dm_du *= -1.0 / range_  # dM/drange = dM/du * du/drange = -(u dM/du) / range
        return m.reshape(d.shape), {
            "range": u_dm_du.reshape(d.shape),
            **{name: dshape[name].reshape(d.shape) for name in names},
        }

    @abc.abstractmethod
    def _formula(self, u, shape, xp, derivatives):
        """The correlation family on scaled distances, with `xp` operations only.

        Parameters
        ----------
        u : 1-D array of module `xp`
            Scaled distances ``d / range`` (>= 0, finite). Read only.
        shape : dict of str to float
            Value of every shape parameter.
        xp : module
            The array module of `u` (``numpy``, ``cupy``).
        derivatives : tuple of str or None
            None for values only; otherwise also ``u dM/du`` (finite at ``u = 0`` for
            every family, unlike ``dM/du``) and ``dM/d<name>`` for these shape
            parameters.

        Returns
        -------
        m : array
        u_dm_du : array or None
        dshape : dict of str to array
        """

    # ------------------------------------------------------------------ bookkeeping
    @property
    def shape_names(self) -> tuple[str, ...]:
        """tuple of str: All shape parameters of the family."""
        return tuple(self._SHAPE_NAMES)

    @property
    def free_shape(self) -> tuple[str, ...]:
        """tuple of str: Shape parameters to be estimated (given as None)."""
        return tuple(key for key in self._SHAPE_NAMES if self._shape[key] is None)

    @property
    def fixed_shape(self) -> dict[str, float]:
        """dict of str to float: Shape parameters with a fixed value."""
        return {key: v for key, v in self._shape.items() if v is not None}

    @property
    def shape_bounds(self) -> dict[str, tuple[float, float]]:
        """dict of str to (float, float): Estimation bounds of every shape parameter."""
        return dict(self._bounds)

    @property
    def shape_start(self) -> dict[str, float]:
        """dict of str to float: Default starting values of the free shape parameters.

        A default outside overridden bounds is replaced by the geometric mean of the
        bounds.
        """
        start = {}
        for key in self.free_shape:
            low, high = self._bounds[key]
            value = self._DEFAULT_START[key]
            start[key] = value if low <= value <= high else math.sqrt(low * high)
        return start

    @property
    def linear_shape(self) -> tuple[str, ...]:
        """tuple of str: Shape parameters the optimizer searches on their natural scale (the
        others on a log scale)."""
        return self._LINEAR_SHAPE

    @property
    def spanned(self) -> dict[str, int]:
        """dict of str to int: Shape parameters whose default bounds scale with the extent of
        a coordinate axis (a time or vertical range), by axis; none for an isotropic family."""
        return {}

    def wrap(self, values: Mapping[str, float]) -> Mapping[str, float]:
        """`values` reduced to their canonical representatives (identity here; an angle
        modulo ``pi`` for :class:`~geostat.kernels.anisotropic.Anisotropic`)."""
        return values

    def with_fixed(self, name: str, value: float) -> Kernel:
        """A copy of this kernel with the shape parameter `name` held at `value` (a profile
        likelihood holds one parameter while the others are estimated).

        Raises
        ------
        ValueError
            If `name` is not a shape parameter or `value` is outside its domain.
        """
        if name not in self._SHAPE_NAMES:
            raise ValueError(
                f"{name!r} is not a shape parameter of {self!r}; those are "
                f"{list(self._SHAPE_NAMES)}."
            )
        held = copy.copy(self)
        held._shape = {**self._shape, name: self._check_shape_value(name, value)}
        return held

    def init_arguments(self) -> dict[str, object]:
        """The constructor arguments that rebuild this kernel (a model file stores them)."""
        custom = {k: v for k, v in self._bounds.items() if v != tuple(self._DEFAULT_BOUNDS[k])}
        values = {"bounds": custom or None, **self._shape}
        return {name: values[name] for name in inspect.signature(type(self)).parameters}

    @property
    def great_circle_valid(self) -> bool:
        """bool: Whether ``M`` is positive definite with great-circle distance for every
        value of the free shape parameters (at the fixed ones)."""
        return self.great_circle_valid_at(self._shape)

    @abc.abstractmethod
    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """Whether ``M`` is positive definite with great-circle distance at given shape values.

        Parameters
        ----------
        shape : dict
            Shape parameter values (a missing or None value: not known, so not valid
            unless the family is valid for all).

        Returns
        -------
        bool
        """

    @property
    def costly(self) -> bool:
        """bool: Whether evaluation is expensive enough to tabulate over fixed distances.

        See :class:`geostat.kernels.tabulation.LogDistanceTable`; elementary closed forms are not.
        """
        return False

    # ------------------------------------------------------------------ dunder
    def _repr_args(self):
        args = [f"{key}={self._shape[key]!r}" for key in self._SHAPE_NAMES]
        custom = {k: v for k, v in self._bounds.items() if v != tuple(self._DEFAULT_BOUNDS[k])}
        if custom:
            args.append(f"bounds={custom!r}")
        return args

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._repr_args())})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._shape == other._shape and self._bounds == other._bounds

    def __hash__(self) -> int:
        return hash(
            (type(self).__name__, tuple(self._shape.items()), tuple(sorted(self._bounds.items())))
        )
