"""A strict stand-in for the GPU: device arrays that NumPy cannot read, and counters.

:class:`StrictBackend` runs the GPU's code paths (flagged like the CuPy back end) on
:class:`DeviceArray` objects: wrappers of NumPy arrays that are *not* ``numpy.ndarray``
subclasses and refuse, as CuPy's arrays do, everything that would move data between host
and device behind the code's back:

* ``numpy.asarray(a)`` (``__array__``) raises TypeError, and so do NumPy functions and
  ufuncs called on a device array (``numpy.sum(a)``: call ``xp.sum``);
* an operation mixing a device array with a ``numpy.ndarray`` raises TypeError (Python and
  NumPy scalars are fine), and so does indexing or assigning with a host index array, a
  host value array or a list (device code moves them with ``xp.asarray``).

What the code is allowed to do is counted in :attr:`StrictBackend.counts`:

``launches``
    Array operations: every ufunc, product, reduction, creation (``empty`` apart), gather,
    scatter, assignment and copy, and every call of the back end's linear algebra; a view
    (basic slicing, ``reshape``/``transpose``/``T`` without a copy, ``asarray`` of a device
    array) is free.
``syncs``
    Device-to-host reads: ``float/int/bool/index`` of a device array, ``item``, ``get``,
    ``tolist``, ``repr``, :meth:`StrictBackend.to_host`, the Cholesky's ``info``, and the
    operations whose result size depends on the data (boolean-mask gathers, ``nonzero``,
    ``flatnonzero``, ``unique``), and every ``eigh`` but those with ``check=False``: CuPy's
    back end reads the solver's ``info`` (it raises on a failure), or solves stacks of
    order over 32 on the host (one read for all such stacks of an ``eigh_stacks`` call).
``uploads``
    Host-to-device copies: ``xp.asarray``/``xp.array`` of host data, the results of the
    stacked ``eigh`` solved on the host (one copy for all the stacks of one call).
``allocations``
    New device arrays (results of operations and creations; views and in-place work apart).

Each read is also recorded by the ``file:line`` that made it (:attr:`StrictBackend.sites`;
every event with ``trace=True``), which names a round trip when a budget fails.
:func:`tlrcore.backends.get_backend` resolves a device array to its back end through
:func:`tlrcore.backends.register_array_type`, and this module is the array namespace of its
arrays, as ``cupy`` is of CuPy's (for code that finds the namespace from an array's type).
"""

from __future__ import annotations

import operator
import sys
from collections import Counter
from dataclasses import dataclass, fields

import numpy as np
import scipy.linalg

from tlrcore.backends import Backend, NumpyBackend, register_array_type
from tlrcore.backends._base import unchecked_eigh

__all__ = ["Counts", "DeviceArray", "StrictBackend", "StrictNumpy"]

#: CuPy's message for an implicit conversion.
IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
    "NumPy array explicitly."
)
#: Largest order of a stacked ``eigh`` that CuPy's back end solves on the device.
BATCHED_JACOBI_MAX = 32
#: NumPy functions whose result size depends on the data (a device-to-host read on CuPy).
DATA_DEPENDENT = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress"})
#: NumPy functions that only allocate.
ALLOCATE_ONLY = frozenset({"empty", "empty_like"})
#: NumPy functions that take host data and copy it to the device.
UPLOADS = frozenset({"asarray", "array"})
#: NumPy functions that touch no array data.
METADATA = frozenset(
    {
        "broadcast_shapes",
        "result_type",
        "promote_types",
        "can_cast",
        "dtype",
        "finfo",
        "iinfo",
        "ndim",
        "shape",
        "isscalar",
    }
)


@dataclass
class Counts:
    """What device code did on a :class:`StrictBackend` (see the module docstring)."""

    launches: int = 0
    syncs: int = 0
    uploads: int = 0
    allocations: int = 0

    def reset(self):
        for field in fields(self):
            setattr(self, field.name, 0)

    def snapshot(self):
        return Counts(**{field.name: getattr(self, field.name) for field in fields(self)})

    def __sub__(self, other):
        return Counts(
            **{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)}
        )


def _host_error(what):
    return TypeError(
        f"a host numpy.ndarray {what}: device code must move it with xp.asarray (CuPy refuses "
        "mixing host and device arrays)."
    )


class DeviceArray:
    """A NumPy array standing for one in device memory (see the module docstring)."""

    __slots__ = ("_a", "_backend")
    __array_ufunc__ = None  # NumPy's ufuncs and binary operators refuse device arrays
    __hash__ = None

    def __init__(self, a, backend):
        self._a = a
        self._backend = backend

    # --- explicit and implicit transfers ----------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        raise TypeError(IMPLICIT)

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(
            f"numpy.{func.__name__} called on a device array; call it through the back end's xp."
        )

    def _read(self):
        self._backend.record(syncs=1)
        return self._a

    def get(self):
        """A host copy (one device-to-host read)."""
        return np.array(self._read())

    def item(self):
        return self._read().item()

    def tolist(self):
        return self._read().tolist()

    def __float__(self):
        return float(self._read())

    def __int__(self):
        return int(self._read())

    def __index__(self):
        return operator.index(self._read())

    def __bool__(self):
        return bool(self._read())

    def __complex__(self):
        return complex(self._read())

    def __repr__(self):
        return f"DeviceArray({self._read()!r})"

    __str__ = __repr__

    # --- metadata (no data) -----------------------------------------------------------------

    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    dtype = property(lambda self: self._a.dtype)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    device = property(lambda self: self._backend)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # --- operations -------------------------------------------------------------------------

    def _op(self, function, *args, **kwargs):
        return self._backend.xp.call(function, (self, *args), kwargs)

    @property
    def T(self):
        return self._op(lambda a: a.T)

    def __getitem__(self, key):
        key = _check_key(key)
        parts = key if isinstance(key, tuple) else (key,)
        if all(_basic(part) for part in parts):
            if Ellipsis not in parts:
                key = (*parts, Ellipsis)  # a view, 0-d where every axis is indexed (as CuPy)
        elif _boolean_key(key):
            self._backend.record(syncs=1)  # the result's size is read back
        return self._op(operator.getitem, key)

    def __setitem__(self, key, value):
        key = _check_key(key)
        if isinstance(value, np.ndarray):
            raise _host_error("assigned to a device array")
        if isinstance(value, (list, tuple)):
            raise TypeError("a list assigned to a device array: move it with xp.asarray.")
        self._backend.xp.call(operator.setitem, (self, key, value), {}, in_place=True)


def _method(name):
    def method(self, *args, **kwargs):
        return self._op(lambda a, *rest, **kw: getattr(a, name)(*rest, **kw), *args, **kwargs)

    method.__name__ = name
    return method


def _binary(function, reflected=False):
    def method(self, other):
        if reflected:
            return self._backend.xp.call(lambda a, b: function(b, a), (self, other), {})
        return self._op(function, other)

    return method


def _inplace(function):
    def method(self, other):
        self._backend.xp.call(function, (self, other), {}, in_place=True)
        return self

    return method


for _name in (
    "reshape transpose copy astype sum max min mean prod std var all any ravel flatten cumsum "
    "argmax argmin clip conj diagonal dot squeeze swapaxes take repeat fill round trace sort "
    "argsort nonzero"
).split():
    setattr(DeviceArray, _name, _method(_name))
for _name, _function in {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "matmul": operator.matmul,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
}.items():
    setattr(DeviceArray, f"__{_name}__", _binary(_function))
    setattr(DeviceArray, f"__r{_name}__", _binary(_function, reflected=True))
    setattr(DeviceArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
for _name in ("lt", "le", "eq", "ne", "gt", "ge"):
    setattr(DeviceArray, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(DeviceArray, f"__{_name}__", _method(f"__{_name}__"))
del _name, _function


def _check_key(key):
    """`key` with every part allowed on a device: no host index arrays, no lists."""
    for part in key if isinstance(key, tuple) else (key,):
        if isinstance(part, np.ndarray):
            raise _host_error("used as an index of a device array")
        if isinstance(part, list):
            raise TypeError("a list used as an index of a device array: move it with xp.asarray.")
    return key


def _basic(part):
    return part is None or part is Ellipsis or isinstance(part, (int, np.integer, slice))


def _boolean_key(key):
    return any(
        isinstance(part, DeviceArray) and part.dtype == np.bool_
        for part in (key if isinstance(key, tuple) else (key,))
    )


class StrictNumpy:
    """The array module of a :class:`StrictBackend`: NumPy's functions on device arrays,
    counting (see the module docstring); ``xp.linalg`` likewise."""

    __name__ = "strict_device"

    def __init__(self, backend, module=np):
        self._backend = backend
        self._module = module
        self._wrapped = {}

    @property
    def linalg(self):
        return StrictNumpy(self._backend, np.linalg)

    @property
    def ndarray(self):
        return DeviceArray

    def __getattr__(self, name):
        attribute = getattr(self._module, name)
        if not callable(attribute) or isinstance(attribute, type):
            return attribute  # dtypes, constants
        if name not in self._wrapped:

            def function(*args, **kwargs):
                return self.call(attribute, args, kwargs, name=name)

            function.__name__ = name
            self._wrapped[name] = function
        return self._wrapped[name]

    def call(self, function, args, kwargs, name="", in_place=False):
        """``function(*args, **kwargs)`` on the unwrapped arrays, counted; results wrapped."""
        backend = self._backend
        upload = name in UPLOADS and not (args and isinstance(args[0], DeviceArray))
        inputs = []
        args = _unwrap(args, inputs, upload)
        kwargs = _unwrap(kwargs, inputs, upload)
        result = function(*args, **kwargs)
        if name in METADATA:
            return result
        if upload:
            backend.record(uploads=1, allocations=1)
            return self._wrap(result)
        if name in DATA_DEPENDENT:
            backend.record(syncs=1)
        if in_place or result is None or "out" in kwargs:
            backend.record(launches=1)
            return self._wrap(result)
        new = [
            r
            for r in (result if isinstance(result, (tuple, list)) else (result,))
            if isinstance(r, np.generic)
            or (isinstance(r, np.ndarray) and not any(np.may_share_memory(r, x) for x in inputs))
        ]
        if new:
            backend.record(launches=int(name not in ALLOCATE_ONLY), allocations=len(new))
        return self._wrap(result)

    def _wrap(self, result):
        if isinstance(result, np.ndarray):
            return DeviceArray(result, self._backend)
        if isinstance(result, np.generic):
            return DeviceArray(np.asarray(result), self._backend)
        if isinstance(result, tuple):
            return tuple(self._wrap(r) for r in result)
        if isinstance(result, list):
            return [self._wrap(r) for r in result]
        return result


def _unwrap(value, inputs, host_allowed):
    """`value` with device arrays replaced by their NumPy arrays (collected in `inputs`);
    TypeError for a host array unless `host_allowed`."""
    if isinstance(value, DeviceArray):
        inputs.append(value._a)
        return value._a
    if isinstance(value, np.ndarray):
        if not host_allowed:
            raise _host_error("passed to a device operation")
        inputs.append(value)
        return value
    if isinstance(value, tuple):
        return tuple(_unwrap(v, inputs, host_allowed) for v in value)
    if isinstance(value, list):
        return [_unwrap(v, inputs, host_allowed) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(v, inputs, host_allowed) for k, v in value.items()}
    if isinstance(value, slice):
        return value  # bounds read through __index__ (counted) when NumPy slices
    return value


class StrictBackend(Backend):
    """Device arrays (:class:`DeviceArray`) that refuse implicit host round trips, flagged like
    the CuPy back end, with the generic dense methods a GPU runs; `free_memory` is fixed
    (default 16 GiB) so that chunking, and with it every count, is the same on every machine."""

    name = "strict"
    batched_by_default = True

    def __init__(self, free_memory=16 * 2**30, trace=False):
        self.counts = Counts()
        #: Per counter, ``file:line`` of the code outside this module that made the counted
        #: events: always for ``syncs``, for all counters with `trace`.
        self.sites = {field.name: Counter() for field in fields(Counts)}
        self.trace = trace
        self.xp = StrictNumpy(self)
        self._free = int(free_memory)
        _BACKENDS[:] = [self]

    def record(self, **events):
        """Add `events` (``launches=1, ...``) to the counters, with their site."""
        site = None
        for kind, number in events.items():
            if not number:
                continue
            setattr(self.counts, kind, getattr(self.counts, kind) + number)
            if self.trace or kind == "syncs":
                if site is None:
                    frame = sys._getframe(1)
                    # the caller of this module and of the back end's methods (a subclass's too)
                    while (
                        frame.f_code.co_filename == __file__ or frame.f_locals.get("self") is self
                    ):
                        frame = frame.f_back
                    site = f"{frame.f_code.co_filename}:{frame.f_lineno}"
                self.sites[kind][site] += number

    def _wrap(self, a):
        """`a` as a device array made by one operation."""
        self.record(launches=1, allocations=1)
        return DeviceArray(a, self)

    def to_host(self, a):
        if isinstance(a, DeviceArray):
            return a.get()
        return np.asarray(a)

    def reset(self):
        """Zero the counters and their sites."""
        self.counts.reset()
        for sites in self.sites.values():
            sites.clear()

    def synchronize(self):
        self.record(syncs=1)

    def small_kernels(self):
        # BLAS on one thread, as the NumPy back end: the stand-in's small kernels run on the
        # host (a GPU back end has nothing to set; the counts do not depend on it)
        return NumpyBackend.small_kernels(self)

    def cholesky(self, a):
        L, info = NumpyBackend.cholesky(self, _device(a))
        self.record(syncs=1)  # info read on the host, as cuSOLVER's devInfo
        return self._wrap(L), info

    def solve_triangular(self, a, b, lower=True, trans=False):
        a, b = _device(a), _device(b)
        if a.ndim == 2 and b.ndim == 2:
            x = scipy.linalg.solve_triangular(
                a, b, lower=lower, trans=int(trans), check_finite=False
            )
        else:
            x = NumpyBackend.solve_triangular(self, a, b, lower, trans)
        return self._wrap(x)

    def eigh(self, a, check=True):
        return self.eigh_stacks([a], check)[0]

    def eigh_stacks(self, stacks, check=True):
        arrays = [_device(a) for a in stacks]
        on_host = [a.ndim > 2 and a.shape[-1] > BATCHED_JACOBI_MAX for a in arrays]
        if any(on_host):  # CuPy's back end: one concatenation read, one copy of the results
            self.record(launches=1, allocations=1, syncs=1, uploads=1)
        if check:  # CuPy reads each device solver's info to raise on a failure
            self.record(syncs=on_host.count(False))
        results = []
        for a in arrays:
            lam, vec = np.linalg.eigh(a) if check else unchecked_eigh(np, a)
            self.record(launches=1, allocations=2)
            results.append((DeviceArray(lam, self), DeviceArray(vec, self)))
        return results

    def normal(self, seed, shape):
        self.record(launches=1, allocations=1)  # drawn on the device, as on CuPy
        return DeviceArray(np.random.default_rng(seed).standard_normal(shape), self)

    def free_memory(self):
        return self._free


def _device(a):
    """The NumPy array of a device array; TypeError for a host one."""
    if not isinstance(a, DeviceArray):
        raise _host_error("passed to the back end's linear algebra")
    return a._a


register_array_type(DeviceArray, lambda a: a.device)

#: Back ends made so far; the last is the "current device" of module-level creations.
_BACKENDS = []


def __getattr__(name):
    """This module is also the array namespace of its arrays, as ``cupy`` is of CuPy's (code
    that finds the namespace from the array type's module, e.g. geostat's kernels, lands
    here): NumPy's names, run by the back end of the first device array among the arguments
    (else the last back end made)."""
    if name.startswith("__") or not hasattr(np, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "linalg":
        return _Namespace("linalg")
    attribute = getattr(np, name)
    if not callable(attribute) or isinstance(attribute, type):
        return attribute
    return _Namespace(None).function(name)


class _Namespace:
    """Module-level functions (or ``linalg``'s) dispatched to a back end's :class:`StrictNumpy`."""

    def __init__(self, submodule):
        self._submodule = submodule

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.function(name)

    def function(self, name):
        def call(*args, **kwargs):
            backend = _first_backend((args, kwargs))
            if backend is None:
                if not _BACKENDS:
                    raise RuntimeError("no StrictBackend has been made")
                backend = _BACKENDS[-1]
            xp = backend.xp if self._submodule is None else getattr(backend.xp, self._submodule)
            return getattr(xp, name)(*args, **kwargs)

        call.__name__ = name
        return call


def _first_backend(value):
    if isinstance(value, DeviceArray):
        return value.device
    if isinstance(value, (tuple, list)):
        values = value
    elif isinstance(value, dict):
        values = value.values()
    else:
        return None
    for v in values:
        found = _first_backend(v)
        if found is not None:
            return found
    return None
