"""Abstract correlation kernel and the shared evaluation machinery.

A kernel describes the correlation function ``M`` of a stationary isotropic
Gaussian process. The covariance between two sites at distance ``h`` is::

    C(h) = variance * M(h / range) + nugget * [h == 0]

:class:`Kernel` holds everything that is common to the families: validation of the
shape parameters and of the call arguments, the bookkeeping of fixed versus free
(estimated) shape parameters, the chain rule for the derivative with respect to
``range``, and the chunked, threaded evaluation of large distance arrays.

A subclass writes only :meth:`Kernel._fill`, which evaluates ``M(u)`` on the scaled
distance ``u = d / range``, ``u * dM/du`` and ``dM/dshape``, and, for the device path,
:meth:`Kernel._device_fill`, the same with the operations of an array module ``xp``
(NumPy or CuPy) only: :meth:`Kernel.device_correlation` and
:meth:`Kernel.device_correlation_and_gradient` evaluate arrays that live on a GPU without
copying them to the host. The CPU path is untouched by it.

Threading
---------
``scipy.special.kv`` and the numpy ufuncs release the GIL, so arrays with more than
``_PARALLEL_MIN_SIZE`` entries are cut into chunks of ``_CHUNK_SIZE`` entries that a
small module-level thread pool evaluates. The pool has
``min(2, os.cpu_count())`` workers unless the environment variable
``GEOSTAT_KERNEL_THREADS`` or :func:`set_num_threads` says otherwise. Results do not
depend on the chunking: every formula is elementwise.
"""

import abc
import concurrent.futures
import logging
import math
import numbers
import os
import threading

import numpy as np

__all__ = ["DEVICE_CHUNK", "Kernel", "get_num_threads", "set_num_threads"]

logger = logging.getLogger(__name__)

# Arrays with more entries than this are evaluated chunk by chunk.
_PARALLEL_MIN_SIZE = 100_000
# Entries per chunk: large enough to amortize dispatch, small enough for the cache.
_CHUNK_SIZE = 32_768
#: Entries per chunk of the device evaluation (:meth:`Kernel.device_correlation`): each
#: temporary of a chunk takes 128 MiB, a whole tile column or matrix takes many chunks.
DEVICE_CHUNK = 1 << 24
_THREADS_ENV = "GEOSTAT_KERNEL_THREADS"

_pool_lock = threading.Lock()
_pool = None
_worker_state = threading.local()


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
    """Return the number of threads used to evaluate large distance arrays.

    Returns
    -------
    int
        Worker threads of the kernel thread pool (1 means serial evaluation).
    """
    return _num_threads


def set_num_threads(n):
    """Set the number of threads used to evaluate large distance arrays.

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
    # A forked child inherits the pool object but not its threads.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _run_in_worker(func, start, stop):
    _worker_state.active = True
    try:
        func(start, stop)
    finally:
        _worker_state.active = False


def _for_chunks(func, size):
    """Call ``func(start, stop)`` on consecutive slices covering ``range(size)``.

    Small arrays are done in one call. Large ones are cut into chunks of
    ``_CHUNK_SIZE`` entries, run on the thread pool when it has more than one
    worker (and serially, chunk by chunk, otherwise or when called from a worker).
    """
    if size <= _PARALLEL_MIN_SIZE:
        func(0, size)
        return
    bounds = [(s, min(s + _CHUNK_SIZE, size)) for s in range(0, size, _CHUNK_SIZE)]
    if _num_threads <= 1 or getattr(_worker_state, "active", False):
        for start, stop in bounds:
            func(start, stop)
        return
    pool = _get_pool()
    futures = [pool.submit(_run_in_worker, func, s, e) for s, e in bounds]
    for future in futures:
        future.result()


def _check_real(value, argname):
    """Return ``value`` as a Python float; TypeError unless it is a real scalar."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.ndarray)):
        raise TypeError(f"{argname} must be a real number, got {type(value).__name__}: {value!r}.")
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "iuf":
            raise TypeError(f"{argname} must be a real scalar, got an array of shape {value.shape}.")
        value = value[()]
    return float(value)


class Kernel(abc.ABC):
    """Abstract isotropic correlation function ``M(d / range)``.

    Subclasses set the class attributes below and implement :meth:`_fill`.

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

    name = ""
    #: Shape parameters of the family, in order.
    _SHAPE_NAMES = ()
    #: ``{name: (low, high, high_inclusive)}``: admissible values (low excluded).
    _SHAPE_DOMAIN = {}
    _DEFAULT_BOUNDS = {}
    _DEFAULT_START = {}

    def __init__(self, shape=None, bounds=None):
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
        argname = argname or key
        value = _check_real(value, argname)
        low, high, high_inclusive = cls._SHAPE_DOMAIN[key]
        upper_ok = value <= high if high_inclusive else value < high
        if not (math.isfinite(value) and value > low and upper_ok):
            closing = "]" if high_inclusive else ")"
            raise ValueError(
                f"{argname} must be finite and in ({low:g}, {high:g}{closing}, got {value!r}."
            )
        return value

    def _check_bounds(self, bounds):
        merged = {key: tuple(self._DEFAULT_BOUNDS[key]) for key in self._SHAPE_NAMES}
        if bounds is None:
            return merged
        if not isinstance(bounds, dict):
            raise TypeError(
                "bounds must be a dict {name: (low, high)}, "
                f"got {type(bounds).__name__}."
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
                raise ValueError(f"bounds[{key!r}] must satisfy low < high, got ({low!r}, {high!r}).")
            merged[key] = (low, high)
        return merged

    def _resolve_shape(self, given):
        """Shape values for one call: the given ones, else the fixed ones."""
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
        try:
            d = np.asarray(d)
            if d.dtype.kind not in "iuf":
                raise TypeError
            d = d.astype(np.float64, copy=False)
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
        u = np.empty(d.shape)
        np.divide(d, rng, out=u)
        return u, rng

    # ------------------------------------------------------------------ evaluation
    def correlation(self, d, range, **shape):
        """Evaluate the correlation ``M(d / range)``.

        Parameters
        ----------
        d : array_like of float
            Non-negative distances, any shape (a condensed ``pdist`` vector or a
            matrix).
        range : float
            Range parameter, > 0, in the units of ``d``.
        **shape : float
            Shape parameter values. Free parameters must be given; fixed ones default
            to their fixed values (a given value overrides them).

        Returns
        -------
        ndarray of float
            ``M(d / range)`` with the shape of ``d``; ``M(0) = 1``.

        Raises
        ------
        TypeError
            For non-numeric arguments or unknown shape names.
        ValueError
            For negative or non-finite distances, ``range <= 0``, a missing free
            shape parameter or a shape value outside its domain.
        """
        u, _ = self._prepare(d, range)
        values = self._resolve_shape(shape)
        m = np.empty_like(u)
        flat_u, flat_m = u.reshape(-1), m.reshape(-1)

        def work(start, stop):
            self._fill(flat_u[start:stop], values, flat_m[start:stop], None, {})

        _for_chunks(work, flat_u.size)
        return m

    def correlation_and_gradient(self, d, range, **shape):
        """Evaluate the correlation and its derivatives with respect to the parameters.

        Parameters
        ----------
        d : array_like of float
            Non-negative distances, any shape.
        range : float
            Range parameter, > 0.
        **shape : float
            Shape parameter values, as in :meth:`correlation`.

        Returns
        -------
        m : ndarray of float
            ``M(d / range)``, shape of ``d``.
        grads : dict of str to ndarray
            ``"range"``: ``dM/drange``; and for each name in :attr:`free_shape`,
            ``dM/d<name>``. Each has the shape of ``d``.
        """
        u, rng = self._prepare(d, range)
        values = self._resolve_shape(shape)
        m = np.empty_like(u)
        u_dm_du = np.empty_like(u)
        grads = {key: np.empty_like(u) for key in self.free_shape}
        flat = [a.reshape(-1) for a in (u, m, u_dm_du)]
        flat_grads = {key: g.reshape(-1) for key, g in grads.items()}

        def work(start, stop):
            sl = slice(start, stop)
            self._fill(flat[0][sl], values, flat[1][sl], flat[2][sl],
                       {key: g[sl] for key, g in flat_grads.items()})

        _for_chunks(work, flat[0].size)
        # dM/drange = dM/du * du/drange = -(u dM/du) / range
        u_dm_du *= -1.0 / rng
        return m, {"range": u_dm_du, **grads}

    # ------------------------------------------------------------------ device evaluation
    def device_correlation(self, d, range, xp, **shape):
        """Evaluate ``M(d / range)`` with the operations of the array module `xp` only.

        The device counterpart of :meth:`correlation`, for arrays of any module with
        NumPy's interface (``numpy`` or ``cupy``): no SciPy, no host copy of `d`. Large
        arrays are evaluated in chunks of :data:`DEVICE_CHUNK` entries to bound the
        temporaries.

        Parameters
        ----------
        d : array of module `xp`
            Distances, any shape. They are trusted to be finite and non-negative (they
            come from validated coordinates); unlike :meth:`correlation`, nothing is
            checked, which would need a reduction and a host synchronization.
        range : float
            Range parameter, > 0.
        xp : module
            ``numpy`` or ``cupy``; the back end's ``xp``.
        **shape : float
            Shape parameter values, as in :meth:`correlation`.

        Returns
        -------
        array of module `xp`
            ``M(d / range)`` with the shape of `d`.

        Raises
        ------
        TypeError, ValueError
            For `range` and `shape` as in :meth:`correlation`.
        NotImplementedError
            For a kernel family without a device formula.
        """
        return self._device_evaluate(d, range, xp, shape, gradient=False)[0]

    def device_correlation_and_gradient(self, d, range, xp, **shape):
        """Evaluate the correlation and its parameter derivatives with `xp` operations only.

        The device counterpart of :meth:`correlation_and_gradient`; arguments as in
        :meth:`device_correlation`.

        Returns
        -------
        m : array of module `xp`
            ``M(d / range)``, shape of `d`.
        grads : dict of str to array of module `xp`
            ``"range"``: ``dM/drange``; and for each name in :attr:`free_shape`,
            ``dM/d<name>``. Each has the shape of `d`.
        """
        return self._device_evaluate(d, range, xp, shape, gradient=True)

    def _device_evaluate(self, d, range_, xp, shape, gradient):
        rng = _check_real(range_, "range")
        if not (math.isfinite(rng) and rng > 0):
            raise ValueError(f"range must be finite and > 0, got {rng!r}.")
        values = self._resolve_shape(shape)
        d = xp.asarray(d, dtype=xp.float64)
        flat = d.reshape(-1)
        names = self.free_shape if gradient else None
        if flat.size <= DEVICE_CHUNK:
            m, u_dm_du, dshape = self._device_fill(flat / rng, values, xp, names)
        else:  # chunks written into the outputs: the temporaries of one chunk at a time
            m = xp.empty(flat.size)
            u_dm_du = xp.empty(flat.size) if gradient else None
            dshape = {name: xp.empty(flat.size) for name in names or ()}
            for start in range(0, flat.size, DEVICE_CHUNK):
                part = slice(start, start + DEVICE_CHUNK)
                m[part], u_dm_du_part, dshape_part = self._device_fill(flat[part] / rng, values, xp, names)
                if gradient:
                    u_dm_du[part] = u_dm_du_part
                    for name in names:
                        dshape[name][part] = dshape_part[name]
        if not gradient:
            return m.reshape(d.shape), {}
        u_dm_du *= -1.0 / rng  # dM/drange = dM/du * du/drange = -(u dM/du) / range
        return m.reshape(d.shape), {"range": u_dm_du.reshape(d.shape),
                                    **{name: dshape[name].reshape(d.shape) for name in names}}

    def _device_fill(self, u, shape, xp, derivatives):
        """Evaluate the family on scaled distances with `xp` operations, returning new arrays.

        Parameters
        ----------
        u : 1-D array of module `xp`
            Scaled distances ``d / range`` (>= 0, finite).
        shape : dict of str to float
            Value of every shape parameter.
        xp : module
        derivatives : tuple of str or None
            None for values only; otherwise also ``u dM/du`` and ``dM/d<name>`` for
            these shape parameters.

        Returns
        -------
        m : array
        u_dm_du : array or None
        dshape : dict of str to array
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no device formula (_device_fill); evaluate it on the CPU with device='cpu'."
        )

    @abc.abstractmethod
    def _fill(self, u, shape, m, u_dm_du, dshape):
        """Evaluate the correlation family on scaled distances, writing in place.

        Parameters
        ----------
        u : ndarray of float, 1-D
            Scaled distances ``d / range`` (>= 0, finite). Read only.
        shape : dict of str to float
            Value of every shape parameter.
        m : ndarray of float, 1-D
            Output for ``M(u)``.
        u_dm_du : ndarray of float, 1-D, or None
            Output for ``u * dM/du`` (finite at ``u = 0`` for every family, unlike
            ``dM/du``), or None when not needed.
        dshape : dict of str to ndarray
            Outputs for ``dM/d<name>``, for the requested shape parameters only.
        """

    # ------------------------------------------------------------------ bookkeeping
    @property
    def shape_names(self):
        """tuple of str: All shape parameters of the family."""
        return tuple(self._SHAPE_NAMES)

    @property
    def free_shape(self):
        """tuple of str: Shape parameters to be estimated (given as None)."""
        return tuple(key for key in self._SHAPE_NAMES if self._shape[key] is None)

    @property
    def fixed_shape(self):
        """dict of str to float: Shape parameters with a fixed value."""
        return {key: v for key, v in self._shape.items() if v is not None}

    @property
    def shape_bounds(self):
        """dict of str to (float, float): Estimation bounds of every shape parameter."""
        return dict(self._bounds)

    @property
    def shape_start(self):
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
    @abc.abstractmethod
    def great_circle_valid(self):
        """bool: Whether ``M`` is positive definite with great-circle distance."""

    @property
    def costly(self):
        """bool: Whether evaluation is expensive enough to tabulate over fixed distances.

        See :class:`geostat.tabulation.LogDistanceTable`; elementary closed forms are not.
        """
        return False

    # ------------------------------------------------------------------ dunder
    def _repr_args(self):
        args = [f"{key}={self._shape[key]!r}" for key in self._SHAPE_NAMES]
        custom = {k: v for k, v in self._bounds.items() if v != tuple(self._DEFAULT_BOUNDS[k])}
        if custom:
            args.append(f"bounds={custom!r}")
        return args

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(self._repr_args())})"

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._shape == other._shape and self._bounds == other._bounds

    def __hash__(self):
        return hash((type(self).__name__, tuple(self._shape.items()),
                     tuple(sorted(self._bounds.items()))))
