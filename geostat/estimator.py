"""The scikit-learn estimator :class:`SpatialGP` and :func:`load`."""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from geostat.checks import (
    ORDERINGS,
    check_bool,
    check_choice,
    check_mapping,
    check_params,
    check_positive_int,
    check_probabilities,
    check_random_state,
    check_tile_size,
)
from geostat.data import (
    FieldLayout,
    Trend,
    as_output,
    check_table,
    convert_time_column,
    field_from_values,
    field_noise,
    field_to_fit,
    is_chunked,
    is_xarray,
    lazy_field,
    prepare_coords,
    prepare_y,
    read_model,
    samples_output,
    sites_of_template,
    table_from_field,
    time_position,
    write_model,
)
from geostat.data.grid_record import grid_from_record, grid_record
from geostat.data.model_file import FITTED_ATTRIBUTES, damaged_file_error
from geostat.data.model_file import VERSION as MODEL_FILE_VERSION
from geostat.data.tables import align_observations, prepare_noise
from geostat.data.types import (
    Device,
    FieldOutput,
    FloatArray,
    Method,
    Observations,
    OnFailure,
    Ordering,
    Params,
    Seed,
    SitesLike,
    SitesOrField,
    TableOutput,
    TrendSpec,
    XarrayDataset,
    XarrayObject,
)
from geostat.distance import (
    Distance,
    get_distance,
    model_distance,
    nearest_pair,
    warn_if_invalid_on_sphere,
)
from geostat.errors import GeostatWarning, ModelFileError, PerturbationWarning
from geostat.kernels import Kernel, get_kernel
from geostat.kernels.models import axis_spans, model_kernel, time_column
from geostat.likelihood import METHODS, make_likelihood
from geostat.likelihood.failure import NEGLIGIBLE, check_on_failure, warning_threshold
from geostat.optimize import MLEResult, ParameterSpace, maximize_likelihood
from geostat.optimize.identification import identification_of
from geostat.optimize.progress import check_verbose, fit_progress, shows_tile_progress
from geostat.optimize.scaling import DataScale, residual_variance
from geostat.optimize.search import LOGLIK_TOLERANCE
from geostat.predict import Kriging
from geostat.saved_state import check_fitted_state
from geostat.solvers import DEVICES, get_backend, resolve_client, tile_progress
from geostat.transforms import BoxCox, Identity, Log, Transform, get_transform
from geostat.validation import cross_validate

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["SpatialGP", "load"]

logger = logging.getLogger(__name__)

#: Most sites of the exact fits that profile the likelihood of a Box-Cox ``lambda``
#: (``target_transform="boxcox"``) for its first estimate.
BOX_COX_SITES = 512
#: Refits of a larger data set at a Box-Cox ``lambda`` refined on the whole data, at most.
BOX_COX_REFITS = 3
#: A refined ``lambda`` whose profile gains less log-likelihood than this ends them.
BOX_COX_GAIN = 1e-3


class SpatialGP(RegressorMixin, BaseEstimator):
    """Gaussian-process regression for spatial data, fitted by maximum likelihood.

    The covariance of the observations at sites ``s_i``, ``s_j`` is
    ``C_ij = variance * M(d(s_i, s_j) / range) + (nugget + noise_i) [i == j]``, with
    ``M`` the kernel correlation (the Matérn convention of ExaGeoStat [2]_) and
    ``noise_i`` known measurement-error variances given to `fit`. The trend is
    estimated by generalized least squares; without known noise the variance is
    profiled out. ``method="tlr"`` uses a tile low-rank Cholesky factorization [1]_.

    Parameters
    ----------
    kernel : str or Kernel, default "matern"
        ``"exponential"``, ``"matern"``, ``"powered_exponential"``, ``"gaussian"`` or a
        kernel object (``geostat.Matern(smoothness=1.5)``, :class:`geostat.Anisotropic`,
        :class:`geostat.SpaceTime`, whose last coordinate is time).
    smoothness : float or None, default None
        Matérn smoothness; ``None`` estimates it.
    anisotropy : None or "geometric", default None
        Estimate a geometric anisotropy: ``params_`` gains ``"anisotropy_ratio"``
        (minor/major range, in (0, 1]), ``"anisotropy_angle"`` (of the major axis,
        radians counterclockwise from x or east, in [0, pi)) and, with a third spatial
        coordinate, ``"vertical_range"``; ``"range"`` is the major range. On
        longitude/latitude it acts in the tangent plane at the sites' centre
        (:class:`geostat.distance.TangentPlaneDistance`; at most 45 degrees away).
    time : None, str or int, default None
        With a space-time kernel, the time column of ``X`` (name or position); None: a
        column named ``"time"``, else the last coordinate column. Lags are in its units.
    nugget : bool or float, default True
        ``True`` estimates a nugget, ``False`` omits it, a number fixes it.
    trend : None, "constant", "linear" or list of columns, default "constant"
        Mean model; a list names covariate columns of ``X`` (an intercept is added); the
        other columns are coordinates.
    distance : {"auto", "euclidean", "chordal", "great_circle"}, default "auto"
        ``"auto"``: chordal (km) for columns named lon/lat (longitude/latitude), else
        Euclidean.
    method : {"auto", "exact", "tlr"}, default "auto"
        ``"exact"``: dense Cholesky. ``"tlr"``: tile low-rank Cholesky (Fisher scoring with
        stochastic traces, :mod:`geostat.optimize.scoring`). ``"auto"``: TLR from
        :data:`geostat.likelihood.TLR_FROM` sites on (on the GPU, exact up to
        :data:`geostat.likelihood.DEVICE_EXACT_MAX` sites if it fits in memory).
    accuracy : "auto" or float, default "auto"
        Relative accuracy of the TLR compression and factorization, in (0, 1).
        ``"auto"``: chosen per evaluation (:mod:`geostat.optimize.accuracy`), 1e-8 far
        from the optimum, down to 1e-12 near a badly conditioned one.
    tile_size : int or None, default None
        TLR tile size; ``None`` chooses one from ``n``.
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
        Site ordering for TLR compression.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: the covariance is built and factored on a CUDA GPU through CuPy
        (``geostat-tlr[gpu]``); `predict` and `sample_y` form cross-covariances on the
        CPU.
    reml : bool, default False
        Maximize the restricted likelihood.
    random_state : int or None, default 0
        Seeds the optimizer's pilot subsample and, by default, `sample_y`.
    bounds : dict or None, default None
        ``(low, high)`` overrides for ``"range"``, ``"variance"``, ``"nugget"`` or shape
        parameters.
    fixed : dict or None, default None
        Hold ``"variance"`` and/or ``"range"`` fixed at the given values.
    n_starts : int, default 3
        Local optimizations started from the best points of a starting grid.
    on_failure : {"shift", "compensate", "step", "raise"}, default "shift"
        What a covariance that is not numerically positive definite does during the fit
        (:mod:`geostat.likelihood.failure`): ``"shift"`` factors it with the smallest
        diagonal shift that works (`perturbation_`, `shift_`, and a
        :class:`geostat.PerturbationWarning` above the accuracy, or ``1e-8`` when
        exact); ``"compensate"`` (TLR) first compensates the diagonal tiles [1]_, then
        shifts (exact fits: as ``"shift"``); ``"step"`` steps away; ``"raise"`` raises
        :class:`tlrcore.NotPositiveDefiniteError`.
    verbose : None, bool or int, default None
        Progress of `fit` on standard error (:mod:`geostat.optimize.progress`).
        ``None``: shown on a terminal for work over 2 s; ``0``/``False``: never;
        ``1``/``True``: always; ``2``: also log each evaluation at INFO. Loggers
        ``geostat`` and ``tlrcore`` log whatever `verbose` is.
    client : None, "default" or distributed.Client, default None
        Run the TLR likelihood on a Dask cluster (``geostat-tlr[dask]``,
        ``docs/cluster.md``); the estimates equal the in-process ones to rounding.
        ``"default"``: the default client when `fit` runs. ``method="auto"`` then means
        ``"tlr"``; ``"exact"`` and ``device="gpu"`` are refused. Neither pickled nor
        saved (a loaded model computes in process); :func:`sklearn.base.clone` shares it.
    target_transform : None, "log", "boxcox" or a transform, default None
        Fit the process to ``g(y)`` (:mod:`geostat.transforms`): ``"log"``,
        ``"boxcox"`` (``lambda`` by maximum likelihood: first on at most
        :data:`BOX_COX_SITES` sites, then with more sites on the whole data, refined
        between refits until it settles, at most :data:`BOX_COX_REFITS` refits) or a
        transform such as ``BoxCox(lmbda=0.5)``. Parameters are in units of ``g(y)``;
        `loglik_` is the density of ``y``; `predict`, `predict_quantiles` and `sample_y`
        give values of ``y``.

    Attributes
    ----------
    params_ : dict
        Estimates of ``variance``, ``range``, the kernel's shape parameters and ``nugget``.
    stderr_ : dict
        Standard errors of `params_` (expected Fisher information; 0.0 when fixed).
    coef_ : ndarray of shape (p,) or (r, p)
        GLS trend coefficients (one row per replicate when ``y`` is 2-D).
    coef_stderr_ : ndarray like `coef_`
    coef_names_ : list of str
    loglik_ : float
        Maximized log-likelihood (restricted when ``reml=True``); for TLR at an accuracy
        (``result_.loglik_accuracy``) where `loglik_error_` is at most 0.01, and
        ``result_.gap_bound`` bounds (95 %) how far the exact value at the estimate lies
        below the exact maximum.
    n_iter_, n_evaluations_ : int
        Iterations of the local search; full-data likelihood evaluations (for TLR every
        full-data factorization, the accuracy check of `loglik_` included).
    converged_ : bool
    method_ : str
        ``"exact"`` or ``"tlr"``.
    accuracy_ : float or None
        TLR accuracy of the fitted factors (None when exact).
    loglik_error_ : float
        Estimated TLR error of `loglik_` (0.0 when exact): the difference from an
        evaluation ten times less accurate (an overestimate). At most 0.01, the accuracy
        tightened tenfold (down to 1e-14) until it is.
    perturbation_ : float
        ``||E||_F / ||K||_F`` of the change made to factor the covariance at the estimate
        (largest over missing-value patterns); 0.0 when none.
    shift_ : float
        The diagonal shift in covariance units (in effect added to the nugget).
    n_safeguarded_ : int
        Factorizations during the fit that needed a shift (for TLR also those of the
        `loglik_error_` check and the Fisher information).
    distance_ : str
        The distance used (``"auto"`` resolved).
    noise_variance_ : ndarray of shape (n,) or None
        The known measurement-error variances given to `fit` (units of ``y`` squared).
    time_unit_ : str or None
        Unit of the time coordinate of a model fitted on dates
        (``"days since 1970-01-01"``, with the calendar for cftime dates); prediction
        times must be of the same kind. None for numeric times or no time.
    kernel_ : Kernel
    result_ : geostat.optimize.MLEResult
    n_features_in_, feature_names_in_
        Set by scikit-learn's validation.

    References
    ----------
    .. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. (2021). H2OPUS-TLR: High
       performance tile low rank symmetric factorizations using adaptive randomized
       approximation. arXiv:2108.11932.
    .. [2] Abdulah, S., Ltaief, H., Sun, Y., Genton, M. G., Keyes, D. E. (2018).
       ExaGeoStat: A high performance unified software for geostatistics on manycore
       systems. IEEE Transactions on Parallel and Distributed Systems, 29(12).
    """

    # Fitted attributes, for type checkers (annotations only: unset until `fit`).
    params_: dict[str, float]
    stderr_: dict[str, float]
    coef_: FloatArray
    coef_stderr_: FloatArray
    coef_names_: list[str]
    loglik_: float
    n_iter_: int
    n_evaluations_: int
    converged_: bool
    method_: str
    accuracy_: float | None
    loglik_error_: float
    perturbation_: float
    shift_: float
    n_safeguarded_: int
    distance_: str
    time_unit_: str | None
    kernel_: Kernel
    result_: MLEResult
    n_features_in_: int
    feature_names_in_: NDArray[np.object_]

    def __init__(
        self,
        kernel: str | Kernel = "matern",
        smoothness: float | None = None,
        anisotropy: str | None = None,
        time: str | int | None = None,
        nugget: bool | float = True,
        trend: TrendSpec = "constant",
        distance: str | Distance = "auto",
        method: Method = "auto",
        accuracy: float | str = "auto",
        tile_size: int | None = None,
        ordering: Ordering = "kdtree",
        device: Device = "cpu",
        reml: bool = False,
        random_state: Seed = 0,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        fixed: Mapping[str, float] | None = None,
        n_starts: int = 3,
        on_failure: OnFailure = "shift",
        verbose: bool | int | None = None,
        client: Any = None,
        target_transform: str | Transform | None = None,
    ) -> None:
        self.kernel = kernel
        self.smoothness = smoothness
        self.anisotropy = anisotropy
        self.time = time
        self.nugget = nugget
        self.trend = trend
        self.distance = distance
        self.method = method
        self.accuracy = accuracy
        self.tile_size = tile_size
        self.ordering = ordering
        self.device = device
        self.reml = reml
        self.random_state = random_state
        self.bounds = bounds
        self.fixed = fixed
        self.n_starts = n_starts
        self.on_failure = on_failure
        self.verbose = verbose
        self.client = client
        self.target_transform = target_transform

    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters (scikit-learn's :func:`~sklearn.base.clone`),
        sharing the Dask client: a connection, which cannot be deep-copied."""
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(
            **{name: clone(value, safe=False) for name, value in params.items()}, client=client
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.input_tags.allow_nan = False
        tags.regressor_tags.poor_score = False
        return tags

    def _check_settings(self):
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r} is not one of {METHODS}.")
        check_choice(self.ordering, "ordering", ORDERINGS)
        if self.anisotropy is not None:
            check_choice(self.anisotropy, "anisotropy", ("geometric",))
        auto = isinstance(self.accuracy, str) and self.accuracy == "auto"
        number = not isinstance(self.accuracy, (bool, str)) and isinstance(
            self.accuracy, (int, float)
        )
        if not auto and not (number and 0 < self.accuracy < 1):
            raise ValueError(
                f"accuracy must be 'auto' or a number in (0, 1); got {self.accuracy!r}."
            )
        check_tile_size(self.tile_size)
        check_bool(self.reml, "reml")
        get_transform(self.target_transform)
        check_positive_int(self.n_starts, "n_starts")
        check_random_state(self.random_state)
        check_on_failure(self.on_failure)
        check_verbose(self.verbose)
        resolve_client(self.client)

    def fit(
        self,
        X: SitesOrField,
        y: Observations | str | None = None,
        noise_variance: ArrayLike | None = None,
    ) -> Self:
        """Estimate the covariance parameters and trend by maximum likelihood.

        Parameters
        ----------
        X : array-like of shape (n, d), DataFrame, xarray.DataArray or xarray.Dataset
            Site coordinates, then the trend covariates named in ``trend``. Or a field,
            an xarray ``DataArray`` (then `y` is omitted): its values are the
            observations (NaN: missing), its lon/lat, longitude/latitude or x/y
            coordinates the sites (a grid or a station dimension), another dimension the
            replicates, its other coordinates the trend covariates
            (:func:`geostat.data.table_from_field`). Dimensions of length 1 are dropped;
            select along any further one first (``da.sel(level=850)``). Or a ``Dataset``
            with `y` the name of the observed variable. A Dask-backed field is reduced
            to its mask chunk by chunk, then loaded. With a space-time kernel a field is
            one realization: each non-NaN cell is an observation at (position, time).
            Time values may be numbers, ``datetime64`` or cftime dates; dates become days
            since 1970-01-01 (`time_unit_`, :mod:`geostat.data.times`). The fitted
            coordinate names are those a prediction template is read by; a trend
            covariate cannot be a coordinate.
        y : array-like of shape (n,) or (n, r), or str
            Observations; ``r`` replicates share the covariance parameters, and NaN
            marks a site missing on a replicate. A Series or DataFrame `y` with a
            DataFrame `X` is paired by index label (the labels must agree). Estimates
            are in the units of `y` (the fit runs in units of order one,
            :mod:`geostat.optimize.scaling`). With `X` a ``Dataset``: the name of the
            observed variable.
        noise_variance : array-like of shape (n,), (n, 1) or (n, r), optional
            Known measurement-error variances (units of `y` squared; 0 for none), added
            to the diagonal besides the nugget:
            ``C = variance * R + nugget * I + diag(noise_variance)``. The variance is
            then searched, not profiled out; ``nugget=True`` estimates a common error on
            top. One value per site: an ``(n, r)`` array must agree across the observed
            replicates of a site (NaN where `y` is NaN). Paired by index label like `y`.
            With an xarray field `X`: a ``DataArray`` of variances that broadcasts against
            the field on its coordinates (per cell, or per site without the replicate or
            time dimension), or the name of a variable of the ``Dataset`` `X`. Kriging
            still predicts the latent process.

        Returns
        -------
        self : SpatialGP

        Raises
        ------
        ValueError, TypeError
            For bad settings or data (the message names the argument), and for data that
            cannot identify the model: constant `y`, duplicate sites without a nugget,
            no more observations than parameters.
        MemoryError
            If the exact method's dense matrices would not fit in memory.
        tlrcore.NotPositiveDefiniteError
            With ``on_failure="raise"``, if the covariance is not numerically positive
            definite during the fit.
        """
        self._fit(X, y, noise_variance)
        return self

    def _fit(self, X, y, noise_variance, warm=None):
        """:meth:`fit`, started at the parameters `warm` of an earlier fit (a warm start,
        :func:`_warm_start`) where given; returns this fit's parameters in that form."""
        self._check_settings()
        inputs = (X, y, noise_variance)
        backend = get_backend(self.device)
        trend = Trend.parse(self.trend)
        family = get_kernel(self.kernel, self.smoothness)
        X, y, field, time, time_unit, noise_variance = self._fit_inputs(
            X, y, trend, family, noise_variance
        )
        check_table(X, "X")
        y = align_observations(X, y)
        if noise_variance is not None:
            noise_variance = align_observations(X, noise_variance, "noise_variance")
        validate_data(self, X, reset=True, dtype="numeric")
        data, distance_name = prepare_coords(X, trend, self.distance, time=time)
        kernel = model_kernel(family, self.anisotropy, data.coords.shape[1], distance_name)
        values, names, one_d = prepare_y(y, data.n)
        noise = None if noise_variance is None else prepare_noise(noise_variance, values)
        transform = self._transform_of(X, values, noise)
        jacobian = transform.log_jacobian(values)
        raw, values = values, transform.forward(values)
        warn_if_invalid_on_sphere(distance_name, kernel)
        fixed = check_mapping(self.fixed, "fixed", "{'range': 100.0}")
        bounds = check_mapping(self.bounds, "bounds", "{'range': (1.0, 500.0)}")
        n_params = data.design.shape[1] + len(kernel.free_shape) + (self.nugget is True)
        n_params += ("variance" not in fixed) + ("range" not in fixed)
        n_observed = int(np.sum(~np.isnan(values)))
        if n_observed <= n_params:
            raise ValueError(
                f"X has {data.n} sample(s) with {n_observed} observed value(s), but the model "
                f"estimates {n_params} parameters; pass more sites or fix parameters."
            )
        data_variance = residual_variance(values, data.design)
        scale = DataScale(DataScale.nearest(np.sqrt(data_variance)).factor, jacobian)
        natural_space = ParameterSpace(
            kernel,
            nugget=self.nugget,
            fixed=fixed,
            bounds=bounds,
            data_variance=data_variance,
            spans=axis_spans(kernel, data.coords),
            known_noise=noise is not None,
        )
        training = _TrainingData(
            data.coords,
            values / scale.factor,
            data.design,
            None if noise is None else noise / scale.factor**2,
        )
        likelihood = self._likelihood_of(training, kernel, distance_name, self.method, backend)
        _check_sites_and_nugget(data.coords, likelihood, natural_space, data_variance, noise)
        space = scale.space_to_unit(
            dataclasses.replace(natural_space, max_distance=likelihood.max_distance)
        )
        with likelihood.fitting(), fit_progress(self.verbose, scale.factor) as progress:
            result = maximize_likelihood(
                likelihood,
                space,
                n_starts=self.n_starts,
                random_state=check_random_state(self.random_state),
                start=None if warm is None else _warm_start(space, warm),
            )
            progress.finish(
                scale.loglik_from_unit(result.loglik, likelihood.n_eff), result.n_evaluations
            )
        self.kernel_ = kernel
        self.distance_ = distance_name
        self.method_ = likelihood.method
        self.accuracy_ = likelihood.accuracy
        self.n_safeguarded_ = likelihood.n_safeguarded
        relative, shift = _perturbation_at(likelihood, result.params)
        self.perturbation_, self.shift_ = relative, shift * scale.factor**2
        self.result_ = scale.result_from_unit(result, likelihood.n_eff)
        self.loglik_error_ = result.loglik_error
        self.params_ = self.result_.params
        self.stderr_ = self.result_.stderr
        self.coef_ = self.result_.coef[0] if one_d else self.result_.coef
        self.coef_stderr_ = self.result_.coef_stderr[0] if one_d else self.result_.coef_stderr
        self.coef_names_ = trend.names(data.coord_names, data.covariate_names)
        self.loglik_ = self.result_.loglik
        self.n_iter_ = result.n_iter
        self.n_evaluations_ = result.n_evaluations
        self.converged_ = result.converged
        _log_fit(self, likelihood, result)
        _warn_if_perturbed(relative, self.shift_, data_variance, likelihood.accuracy, self.params_)
        _warn_if_loglik_unsettled(self.loglik_error_, self.result_.loglik_accuracy)
        self._trend = trend
        self._layout = data.layout
        self._y_names, self._y_one_d = names, one_d
        self._scale = scale
        self._training = training
        self._solvers = _Solvers(likelihood, Kriging(likelihood, result.params, result.coef))
        self._field = field
        self.time_unit_ = time_unit
        self.transform_ = transform
        relative = _relative_params(result.params, space.data_variance)
        sites = int(np.sum(~np.isnan(raw).all(axis=1)))
        if get_transform(self.target_transform).n_estimated and sites > BOX_COX_SITES:
            self._refit_box_cox(inputs, raw, likelihood, result.params, relative)
        return relative

    def _refit_box_cox(self, inputs, raw, likelihood, params, warm):
        """Bring a Box-Cox ``lambda`` first estimated on a subsample to the maximum
        likelihood of the whole data: ``lambda`` maximizing the profile of the fit's
        `likelihood` over the variance and trend at its correlation parameters `params`
        (the fit's factors: solves only, ``Likelihood.residual_form``), plus the
        Jacobian, then a refit of `inputs` at that ``lambda``;
        until a refined ``lambda`` gains less than :data:`BOX_COX_GAIN`, at most
        :data:`BOX_COX_REFITS` refits, each started at the last fit's parameters `warm`
        (:func:`_relative_params`). Each step increases the log-likelihood of the data
        (coordinate ascent); `n_evaluations_` counts all the fits'."""
        setting, evaluations = self.target_transform, 0

        def profile_loglik(z):  # of g(y) = z, over the variance and trend
            return -0.5 * likelihood.n_eff * np.log(likelihood.residual_form(z, params))

        def loglik(transform):  # of y
            return profile_loglik(transform.forward(raw)) + transform.log_jacobian(raw)

        try:
            for _ in range(BOX_COX_REFITS):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    refined = BoxCox.estimate(raw, profile_loglik)
                gain = loglik(refined) - loglik(self.transform_)
                logger.info(
                    "Box-Cox lambda on the whole data: %.6g (from %.6g), profile gain %.3g",
                    refined.lmbda,
                    self.transform_.lmbda,
                    gain,
                )
                if not gain >= BOX_COX_GAIN:
                    break
                for caught_warning in caught:  # a lambda on a bound, about the one refitted
                    warnings.warn_explicit(
                        caught_warning.message,
                        caught_warning.category,
                        caught_warning.filename,
                        caught_warning.lineno,
                    )
                evaluations += self.n_evaluations_
                self.target_transform = refined
                warm = self._fit(*inputs, warm=warm)
                likelihood, params = self._solvers.likelihood, self._solvers.kriging.params
        finally:
            self.target_transform = setting
        self.n_evaluations_ += evaluations

    def _transform_of(self, X, values, noise):
        """The target transform of a fit; a Box-Cox ``lambda`` not given is estimated by
        maximum likelihood, profiled by exact fits (one start) at :data:`BOX_COX_SITES`
        random observed sites."""
        transform = get_transform(self.target_transform)
        if noise is not None and transform.name != "identity":
            raise ValueError(
                f"noise_variance is given in the units of y, but target_transform="
                f"{self.target_transform!r} fits a transform of y; fit with one of the two."
            )
        if not transform.n_estimated:
            return transform
        seed = int(self.random_state) if isinstance(self.random_state, (int, np.integer)) else 0
        observed = np.flatnonzero(~np.isnan(values).all(axis=1))
        rows = np.sort(
            np.random.default_rng(seed).choice(
                observed, min(BOX_COX_SITES, observed.size), replace=False
            )
        )
        pilot = clone(self).set_params(
            target_transform=None, method="exact", verbose=0, n_starts=1, client=None
        )
        sites = X.iloc[rows] if isinstance(X, pd.DataFrame) else np.asarray(X)[rows]

        def profile_loglik(z):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GeostatWarning)
                return pilot.fit(sites, z).loglik_

        return transform.resolve(values[rows], profile_loglik)

    def _transform(self):
        """The fitted target transform (the identity for a model saved without one)."""
        return getattr(self, "transform_", None) or Identity()

    def _fit_inputs(self, X, y, trend, family, noise_variance=None):
        """``(X, y, field layout or None, time column, time unit, noise_variance)`` of a fit's
        inputs, a field (and its known noise) turned into its table and dates into float
        days."""
        field = None
        time = time_column(family, self.time, X)
        if is_xarray(X):
            da, source = field_to_fit(X, y, "X")
            field_time = (True if self.time is None else self.time) if family.time_axis else None
            X, y, field = table_from_field(da, "X", trend.columns, source, time=field_time)
            if noise_variance is not None:
                noise_variance = field_noise(da, noise_variance, source, time=field_time)
        elif is_xarray(noise_variance):
            raise TypeError(
                "noise_variance is an xarray object but X is a table; pass the variances as "
                "an array in the rows of X, or fit the field itself (X a DataArray)."
            )
            # the time coordinate is the last coordinate column
            time = True if family.time_axis else None
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        X, time_unit = convert_time_column(X, time_position(X, trend, time, "X"), "X")
        return X, y, field, time, time_unit, noise_variance

    def _template_sites(self, X):
        """``(sites, template layout, fitted layout, complete)`` of an xarray template:
        its coordinates read by the fitted names then covariates, and which cells have
        complete covariates."""
        check_is_fitted(self)
        position = self._coordinate_names()
        fitted = self._field or self._table_layout(position)
        hint = (
            ""
            if hasattr(self, "feature_names_in_")
            else (
                " The model was fitted on an array without column names, whose coordinate "
                f"columns are read from coordinates named {list(position)}; fit it on a "
                "DataFrame to read coordinates of other names."
            )
        )
        if self.kernel_.time_axis:
            hint += (
                " A space-time model predicts at the times of the coordinate "
                f"{position[-1]!r}: give the template one, e.g. "
                f"X.expand_dims({position[-1]}=times)."
            )
        sites, here, complete = sites_of_template(X, position, "X", self._covariate_names(), hint)
        return sites, here, fitted, complete

    def _coordinate_names(self):
        """Names of the fitted coordinate columns in distance order; for an unnamed
        array, ``("x", "y")`` or (spherical distance) ``("lon", "lat")``."""
        _, coord_pos, _ = self._layout
        if hasattr(self, "feature_names_in_"):
            return tuple(str(self.feature_names_in_[i]) for i in coord_pos)
        time = ("time",) if self.kernel_.time_axis else ()
        if len(coord_pos) != 2 + len(time):
            raise ValueError(
                f"the model was fitted on an array with {len(coord_pos)} coordinate "
                "column(s) and no column names, so the coordinates of an xarray template X "
                "cannot be matched to them; fit it on a DataFrame whose columns are named "
                "like the template's coordinates."
            )
        return (("x", "y") if self.distance_ == "euclidean" else ("lon", "lat")) + time

    def _covariate_names(self):
        """Names of the trend covariates: fitted column names, or the `trend` entries."""
        _, _, cov_pos = self._layout
        if hasattr(self, "feature_names_in_"):
            return tuple(str(self.feature_names_in_[i]) for i in cov_pos)
        return self._trend.columns

    def _new_sites(self, X):
        check_is_fitted(self)
        if self.kernel_.time_axis:
            X, _ = convert_time_column(
                X, self._layout[1][-1], "X", expected=getattr(self, "time_unit_", None)
            )
        check_table(X, "X")
        validate_data(self, X, reset=False, dtype="numeric")
        data, _ = prepare_coords(
            X,
            self._trend,
            self.distance_,
            layout=self._layout,
            time=True if self.kernel_.time_axis else None,
        )
        return data

    @overload
    def predict(self, X: pd.DataFrame, return_std: Literal[False] = ...) -> TableOutput: ...
    @overload
    def predict(
        self, X: pd.DataFrame, return_std: Literal[True]
    ) -> tuple[TableOutput, TableOutput]: ...
    @overload
    def predict(self, X: XarrayObject, return_std: Literal[False] = ...) -> FieldOutput: ...
    @overload
    def predict(
        self, X: XarrayObject, return_std: Literal[True]
    ) -> tuple[FieldOutput, FieldOutput]: ...
    @overload
    def predict(self, X: ArrayLike, return_std: Literal[False] = ...) -> FloatArray: ...
    @overload
    def predict(self, X: ArrayLike, return_std: Literal[True]) -> tuple[FloatArray, FloatArray]: ...
    @overload
    def predict(self, X: SitesOrField, return_std: bool = ...) -> Any: ...
    def predict(self, X: SitesOrField, return_std: bool = False) -> Any:
        """Kriging prediction of the latent process at new sites.

        Parameters
        ----------
        X : array-like of shape (m, d), DataFrame, or xarray DataArray/Dataset
            New sites with the columns of the fit; or an xarray template with the fitted
            coordinates and trend covariates: every cell is predicted (NaN where a
            covariate is NaN). Its coordinates are read by the fitted names (``x``,
            ``y``, or ``lon``, ``lat``, for a model fitted on an unnamed array),
            whatever the order of its dimensions; a template without them is refused
            with the rename that fixes it. A Dask-backed template gives a lazy result.
        return_std : bool, default False
            Also return the kriging standard deviation (universal kriging: the trend
            uncertainty included, the nugget excluded).

        With a target transform ``g`` the mean and standard deviation are those of
        ``g^{-1}`` of the latent process, in the units of ``y``. From
        :data:`geostat.predict.COMPRESSED_FROM` target-site pairs on, the
        cross-covariance is compressed and the variance conditioned on local
        neighbourhoods (:mod:`geostat.predict`).

        Returns
        -------
        mean : ndarray of shape (m,) or (m, r), or a pandas Series/DataFrame for a
            DataFrame input, or an xarray DataArray named ``mean`` on the template's
            coordinates (then the fitted replicate dimension) for an xarray template
        std : same shape as `mean`, only when `return_std`
        """
        if is_xarray(X):
            return self._predict_field(X, return_std)
        data = self._new_sites(X)
        transform = self._transform()
        wrap = lambda a: as_output(a, data.index, self._y_names, self._y_one_d)  # noqa: E731
        with tile_progress(shows_tile_progress(getattr(self, "verbose", None))):
            if not return_std and transform.name == "identity":
                return wrap(self._scale.factor * self._kriging.predict(data.coords, data.design))
            mu, s = self._gaussian_prediction(data)
        mean = transform.mean(mu, s)
        return (wrap(mean), wrap(transform.std(mu, s))) if return_std else wrap(mean)

    def _gaussian_prediction(self, data, include_nugget=False):
        """Kriging mean and standard deviation of ``g(y)``, ``(m, r)`` each; with
        `include_nugget`, of a new observation."""
        factor = self._scale.factor
        mean, var = self._kriging.predict(data.coords, data.design, return_var=True)
        if include_nugget:
            var = var + (self.params_.get("nugget", 0.0) + self.shift_) / factor**2
        return factor * mean, factor * np.sqrt(var)

    def predict_quantiles(
        self,
        X: SitesOrField,
        quantiles: ArrayLike = (0.05, 0.5, 0.95),
        include_nugget: bool = False,
    ) -> Any:
        """Quantiles of the kriging predictive distribution at new sites, in the units of ``y``.

        With a target transform ``g`` the quantile ``q`` of ``y`` is
        ``g^{-1}(mu + s Phi^{-1}(q))``, with ``mu``, ``s`` the Gaussian predictive mean
        and standard deviation of ``g(y)``.

        Parameters
        ----------
        X : array-like of shape (m, d), DataFrame, or xarray DataArray/Dataset template
            As for :meth:`predict`.
        quantiles : sequence of float, default (0.05, 0.5, 0.95)
            Probabilities in (0, 1).
        include_nugget : bool, default False
            Quantiles of a new observation (the nugget and any factorization shift added
            to the kriging variance) instead of the latent process.

        Returns
        -------
        ndarray of shape (m, k), or (m, r, k) with replicates; for a DataFrame `X` a
            DataFrame on its index with one column per quantile (columns named
            ``quantile``; with replicates a ``(replicate, quantile)`` MultiIndex); for an
            xarray template a DataArray named ``quantile`` with a trailing ``quantile``
            dimension labelled by the probabilities

        Raises
        ------
        ValueError
            If a quantile is not a number in (0, 1).
        """
        check_is_fitted(self)
        q = check_probabilities(quantiles, "quantiles", "(0.05, 0.5, 0.95)")
        include_nugget = check_bool(include_nugget, "include_nugget")
        transform = self._transform()

        def values_at(data):
            mu, s = self._gaussian_prediction(data, include_nugget)
            return np.stack([transform.quantile(mu, s, p) for p in q], axis=-1)

        if is_xarray(X):
            sites, here, fitted, complete = self._template_sites(X)
            values = values_at(self._new_sites(self._fitted_input(sites[complete])))
            field = field_from_values(
                values[:, 0, :] if self._y_one_d else values,
                X,
                here,
                fitted,
                "sample",
                samples=True,
                complete=complete,
            )
            return field.rename(sample="quantile").assign_coords(quantile=q).rename("quantile")
        data = self._new_sites(X)
        return samples_output(
            values_at(data), data.index, self._y_names, self._y_one_d, axis="quantile", labels=q
        )

    def _table_layout(self, position):
        """Field layout of a model fitted on a table; replicates form a ``replicate``
        dimension labelled by their names."""
        if self._y_one_d:
            return FieldLayout(position, ())
        labels = np.asarray(self._y_names) if self._y_names else np.arange(len(self.coef_))
        return FieldLayout(position, (), "replicate", labels)

    def _predict_field(self, template, return_std):
        """Kriging on every cell of an xarray template; lazy for a Dask-backed one."""
        sites, here, fitted, complete = self._template_sites(template)
        names = ("mean", "std") if return_std else ("mean",)
        predict_rows = lambda rows: self._predict_rows(sites, complete, rows, return_std)  # noqa: E731
        if is_chunked(template):
            n_replicates = None if self._y_one_d else len(self.coef_)
            fields = lazy_field(predict_rows, template, here, fitted, names, n_replicates)
        else:
            out = predict_rows(np.arange(len(sites)))
            fields = [
                field_from_values(values, template, here, fitted, name)
                for values, name in zip(out, names, strict=True)
            ]
        return tuple(fields) if return_std else fields[0]

    def _predict_rows(self, sites, complete, rows, return_std):
        """Predictions at `rows` of a template's sites, NaN where a covariate is missing."""
        kept = rows[complete[rows]]
        shape = (len(rows),) + (() if self._y_one_d else (len(self.coef_),))
        outputs = [np.full(shape, np.nan) for _ in range(2 if return_std else 1)]
        if kept.size:
            found = self.predict(self._fitted_input(sites.iloc[kept]), return_std=return_std)
            for output, values in zip(outputs, found if return_std else (found,), strict=True):
                output[complete[rows]] = np.asarray(values)
        return outputs

    def _fitted_input(self, sites):
        """A template's sites in the form of the fitted input (column order, frame or
        array)."""
        _, coord_pos, cov_pos = self._layout
        ordered = sites.iloc[:, np.argsort([*coord_pos, *cov_pos])]
        return ordered if hasattr(self, "feature_names_in_") else ordered.to_numpy()

    @overload
    def sample_y(
        self, X: pd.DataFrame, n_samples: int = ..., random_state: Seed = ...
    ) -> pd.DataFrame: ...
    @overload
    def sample_y(
        self, X: XarrayObject, n_samples: int = ..., random_state: Seed = ...
    ) -> FieldOutput: ...
    @overload
    def sample_y(
        self, X: ArrayLike, n_samples: int = ..., random_state: Seed = ...
    ) -> FloatArray: ...
    def sample_y(self, X: SitesOrField, n_samples: int = 1, random_state: Seed = None) -> Any:
        """Conditional simulations of the latent process at new sites.

        Parameters
        ----------
        X : array-like of shape (m, d), DataFrame, or xarray DataArray/Dataset template
            As for :meth:`predict` (a template's coordinates are read by the fitted names).
        n_samples : int, default 1
        random_state : int, numpy Generator or None
            ``None`` uses the estimator's ``random_state``.

        Returns
        -------
        ndarray of shape (m, n_samples), or (m, r, n_samples) with replicates; for a
            DataFrame `X` a DataFrame on its index with one column per draw (columns
            named ``sample``; with replicates a ``(replicate, sample)`` MultiIndex); for
            an xarray template a DataArray named ``sample`` with a trailing ``sample``
            dimension
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = check_random_state(
            self.random_state if random_state is None else random_state, "random_state"
        )
        if is_xarray(X):
            sites, here, fitted, complete = self._template_sites(X)
            draws = self._draws(
                self._new_sites(self._fitted_input(sites[complete])), n_samples, rng
            )
            return field_from_values(
                draws[:, 0, :] if self._y_one_d else draws,
                X,
                here,
                fitted,
                "sample",
                samples=True,
                complete=complete,
            )
        data = self._new_sites(X)
        return samples_output(
            self._draws(data, n_samples, rng), data.index, self._y_names, self._y_one_d
        )

    def _draws(self, data, n_samples, rng):
        """Conditional draws, ``(m, r, n_samples)``, in the units of `y`."""
        return self._transform().inverse(
            self._scale.factor * self._kriging.sample(data.coords, data.design, n_samples, rng)
        )

    def score(self, X: SitesLike, y: Observations, sample_weight: ArrayLike | None = None) -> float:
        """Coefficient of determination R^2 of the kriging mean.

        NaN in `y` marks a site missing on a replicate: each replicate is scored on its
        observed sites and the scores are averaged, as scikit-learn averages outputs.

        Parameters
        ----------
        X : array-like of shape (m, d) or DataFrame
        y : array-like of shape (m,) or (m, r)
            A Series or DataFrame is paired with a DataFrame `X` by index label.
        sample_weight : array-like of shape (m,), optional

        Returns
        -------
        float
        """
        from sklearn.metrics import r2_score

        y = align_observations(X, y)
        truth = np.asarray(y, dtype=np.float64)
        prepare_y(truth, truth.shape[0])  # a replicate with no observed value cannot be scored
        if not np.isnan(truth).any():
            return super().score(X, y, sample_weight)
        pred = np.asarray(self.predict(X), dtype=np.float64).reshape(truth.shape[0], -1)
        truth = truth.reshape(truth.shape[0], -1)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        scores = []
        for j in range(truth.shape[1]):
            seen = ~np.isnan(truth[:, j])
            w = None if weights is None else weights[seen]
            scores.append(r2_score(truth[seen, j], pred[seen, j], sample_weight=w))
        return float(np.mean(scores))

    @property
    def n_params_(self) -> int:
        """int: Number of estimated parameters: ``result_.estimated`` (a profiled
        variance included), all trend coefficients, an estimated Box-Cox ``lambda``."""
        check_is_fitted(self)
        return (
            len(self.result_.estimated)
            + int(np.size(self.coef_))
            + get_transform(self.target_transform).n_estimated
        )

    @property
    def aic_(self) -> float:
        r"""float: Akaike's information criterion ``2 k - 2 loglik_``, ``k`` =
        :attr:`n_params_`. With ``reml=True`` it compares models of one trend only."""
        return 2.0 * self.n_params_ - 2.0 * self.loglik_

    @property
    def bic_(self) -> float:
        r"""float: Schwarz's Bayesian information criterion ``k log N - 2 loglik_`` with
        ``k`` = :attr:`n_params_` and ``N`` the number of observed values."""
        n_obs = int(np.sum(~np.isnan(self._training.y)))
        return self.n_params_ * float(np.log(n_obs)) - 2.0 * self.loglik_

    @property
    def weakly_identified_(self) -> dict:
        """dict: Weakly identified parameters, each with reasons and a remedy
        (:func:`geostat.optimize.identification.weakly_identified`): relative standard
        error above 0.5, estimate on a search bound, range comparable to the largest
        site separation. Empty when all are well identified."""
        return identification_of(self)

    def cross_validate(
        self,
        cv: Literal["loo"] | int = "loo",
        scoring: str | Iterable[str] | None = None,
        level: float = 0.9,
        refit: bool = False,
        random_state: Seed = 0,
        folds: ArrayLike | None = None,
        as_table: bool = False,
    ) -> pd.DataFrame | XarrayDataset:
        """Leave-one-out or K-fold cross-validation at the fitted parameters.

        Each observation (or fold) is predicted from the others by universal kriging, in
        closed form from the fitted factor [1]_; see
        :func:`geostat.validation.cross_validate` for the parameters and the result: a
        table with a row per held-out observation, or for a model fitted on an xarray
        field an ``xarray.Dataset`` on its grid (``observed``, ``mean``, ``std``,
        ``standardized``, and ``fold`` for K-fold; NaN where nothing was observed), unless
        `as_table`.

        References
        ----------
        .. [1] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
           Mathematical Geology, 15(6).
        """
        return cross_validate(
            self,
            cv=cv,
            scoring=scoring,
            level=level,
            refit=refit,
            random_state=random_state,
            folds=folds,
            as_table=as_table,
        )

    def log_likelihood(self, params: Params) -> float:
        """Log-likelihood of the training data at given parameters (trend by GLS).

        Parameters
        ----------
        params : dict
            ``variance``, ``range``, ``nugget`` and shape parameters.

        Returns
        -------
        float
            Restricted log-likelihood when the estimator uses REML.
        """
        check_is_fitted(self)
        unit = self._scale.params_to_unit(check_params(params, self.kernel_))
        return self._scale.loglik_from_unit(
            self._likelihood.log_likelihood(unit), self._likelihood.n_eff
        )

    def confidence_intervals(
        self, level: float = 0.95, method: Literal["profile", "wald", "log-wald"] = "profile"
    ) -> pd.DataFrame:
        """Confidence intervals for the estimated covariance parameters.

        ``"wald"``: ``estimate ± z stderr_``, ``z`` the normal quantile of
        ``(1 + level) / 2``; ``"log-wald"``: ``exp(log estimate ± z stderr_ / estimate)``;
        ``"profile"``: the ``theta`` with ``2 (loglik_ - l_p(theta)) <= chi2_1(level)``,
        ``l_p`` the profile log-likelihood (other parameters maximized, on the fit's
        likelihood). See :mod:`geostat.optimize.intervals`.

        Parameters
        ----------
        level : float, default 0.95
            Confidence level, in (0, 1).
        method : {"profile", "wald", "log-wald"}, default "profile"

        Returns
        -------
        pandas.DataFrame
            One row per estimated parameter; columns ``estimate``, ``lower``, ``upper``
            and, for ``"profile"``, ``at_bound`` (an endpoint is a bound of the parameter
            space) and ``one_sided`` (the estimate is on a bound, e.g. a nugget of 0: the
            interval runs from it to the critical value of the 50:50 mixture of
            chi-squared 0 and 1 [1]_).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            For a `level` outside (0, 1) or an unknown `method`.

        References
        ----------
        .. [1] Self, S. G., Liang, K.-Y. (1987). Asymptotic properties of maximum
           likelihood estimators and likelihood ratio tests under nonstandard
           conditions. Journal of the American Statistical Association, 82(398).
        """
        from geostat.optimize.intervals import confidence_intervals

        check_is_fitted(self)
        verbose = getattr(self, "verbose", None) if method == "profile" else 0  # only profiles
        with fit_progress(verbose, self._scale.factor, name="geostat profile"):
            return confidence_intervals(self, level, method)

    def save(self, path: str | bytes | os.PathLike[str]) -> None:
        """Write the fitted model to a file that :func:`geostat.load` reads back.

        The file (a zip of JSON and ``.npy`` arrays, :mod:`geostat.data.model_file`)
        holds the settings, estimates and training data, not the covariance factor
        (recomputed at the first prediction after loading, to the same predictions) nor
        the Dask `client`. Loading runs no pickle. The write is atomic: a failed save
        leaves an existing file as it was.

        Parameters
        ----------
        path : str, bytes or os.PathLike
            The file to write (for example ``"model.npz"``); an existing one is replaced.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            If a setting cannot be stored without pickle (a kernel class of your own, a
            NumPy ``Generator`` as ``random_state``): the message names it.
        TypeError
            If `path` is not a str, bytes or os.PathLike.
        OSError
            If the file cannot be written (:class:`IsADirectoryError` when `path` is a folder).
        """
        check_is_fitted(self)
        path = _path_argument(path)
        params = self.get_params(deep=False)
        del params["client"]  # a connection, not a setting: a loaded model computes in process
        required, optional = FITTED_ATTRIBUTES[MODEL_FILE_VERSION]
        fitted = {k: v for k, v in self.__getstate__().items() if k in required | optional}
        grid = None if self._field is None else self._field.grid
        record = None if grid is None else grid_record(grid)
        if record is not None:
            fitted["_field_grid"] = record
        write_model(path, params, fitted)

    def __getstate__(self):
        """The state to pickle, without the factors (rebuilt from the training data at
        first use) and the Dask client."""
        state = {k: v for k, v in super().__getstate__().items() if k != "_solvers"}
        return {**state, "client": None} if "client" in state else state

    @property
    def _likelihood(self):
        """The likelihood of the training data with the fitted settings."""
        return self._fitted_solvers().likelihood

    @property
    def _kriging(self):
        """The kriging predictor at the estimates."""
        return self._fitted_solvers().kriging

    def _fitted_solvers(self):
        """The likelihood and kriging predictor of the fit; after unpickling or loading,
        rebuilt as `fit` built them, on the fitted device or else the CPU."""
        solvers = getattr(self, "_solvers", None)
        if solvers is None:
            check_is_fitted(self)
            backend = _available_backend(self.device)
            with tile_progress(shows_tile_progress(getattr(self, "verbose", None))):
                likelihood = self._likelihood_of(
                    self._training,
                    self.kernel_,
                    self.distance_,
                    self.method_,
                    backend,
                    self.accuracy_,
                )
                # the estimates in fitting units, exactly (the scale is a power of two)
                params, coef = (
                    self._scale.params_to_unit(self.params_),
                    self.result_.coef / self._scale.factor,
                )
                solvers = self._solvers = _Solvers(likelihood, Kriging(likelihood, params, coef))
        return solvers

    def _likelihood_of(self, training, kernel, distance_name, method, backend, accuracy=None):
        """The likelihood of `training` with this estimator's settings (`accuracy`
        overrides the setting)."""
        seed = int(self.random_state) if isinstance(self.random_state, (int, np.integer)) else 0
        return make_likelihood(
            method,
            training.coords,
            training.y,
            training.design,
            kernel,
            model_distance(distance_name, kernel, training.coords),
            self.reml,
            accuracy=self.accuracy if accuracy is None else accuracy,
            tile_size=self.tile_size,
            ordering=self.ordering,
            random_state=seed,
            on_failure=self.on_failure,
            backend=backend,
            client=resolve_client(getattr(self, "client", None)),
            noise=training.noise,
        )

    @property
    def noise_variance_(self) -> FloatArray | None:
        """ndarray of shape (n,) or None: Known measurement-error variances of the training
        sites (units of ``y`` squared), or None."""
        check_is_fitted(self)
        noise = self._training.noise
        return None if noise is None else noise * self._scale.factor**2


@dataclasses.dataclass(frozen=True)
class _TrainingData:
    """Sites, observations, trend design and known noise variances (None: none), in
    fitting units (divided by the data scale, or its square)."""

    coords: np.ndarray
    y: np.ndarray
    design: np.ndarray
    noise: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class _Solvers:
    """The likelihood and kriging predictor of a fit, and its profile likelihoods once
    computed."""

    likelihood: object
    kriging: Kriging
    profile: dict = dataclasses.field(default_factory=dict)


#: The record classes a model file of :class:`SpatialGP` holds.
_SAVED_RECORDS = (MLEResult, Trend, FieldLayout, DataScale, _TrainingData, Identity, Log, BoxCox)


def load(path: str | bytes | os.PathLike[str]) -> SpatialGP:
    """Read a model written by :meth:`SpatialGP.save` (or ``geostat fit --save-model``).

    No pickle is involved, so a model file from elsewhere is safe to open. The file is
    checked before anything it declares is allocated (:mod:`geostat.data.model_file`),
    then every value is checked as a fit would have made it. The covariance factor is
    recomputed at the first prediction (on the CPU where no GPU is available).

    Parameters
    ----------
    path : str, bytes or os.PathLike

    Returns
    -------
    SpatialGP
        The fitted estimator; ``predict`` and ``sample_y`` give what the saved one gave.

    Raises
    ------
    OSError
        If `path` cannot be read (:class:`FileNotFoundError` when it does not exist).
    geostat.errors.ModelFileError
        A :class:`ValueError`: if `path` is not a regular geostat model file, is damaged
        (truncated, corrupted, or holding values no fit gives), exceeds the size limits,
        or was written in a newer format.

    Examples
    --------
    >>> est.save("model.npz")                      # doctest: +SKIP
    >>> gs.load("model.npz").predict(new_sites)    # doctest: +SKIP
    """
    path = _path_argument(path)
    params, fitted = read_model(path, _SAVED_RECORDS)
    unknown = sorted(set(params) - (set(SpatialGP().get_params(deep=False)) - {"client"}))
    if unknown:
        raise ModelFileError(
            f"{path} sets {[name[:100] for name in unknown[:5]]}, which this geostat's "
            "SpatialGP does not have; upgrade geostat to load it."
        )
    model = SpatialGP(**params)
    record = fitted.pop("_field_grid")
    try:
        _check_saved_settings(model)
        check_fitted_state(fitted, _TrainingData)
        _check_fitted_transform(fitted["transform_"])
        grid = _field_grid(record, fitted)
    except (ValueError, TypeError, OverflowError) as exc:  # Overflow: an int beyond float range
        raise damaged_file_error(path, str(exc).rstrip(".")) from None
    model.__dict__.update(fitted)
    if grid is not None:
        model._field.grid = grid
    model.transform_ = fitted["transform_"] or Identity()
    return model


def _field_grid(record, fitted):
    """The :class:`~geostat.data.FieldGrid` of a loaded field model's grid `record` (None
    without one, or without xarray to hold it); ValueError for a grid of a model not
    fitted on a field or one no fit writes."""
    if record is None:
        return None
    if fitted["_field"] is None:
        raise ValueError("_field_grid is given for a model fitted on a table, not a field")
    try:
        import xarray  # noqa: F401  (the grid's coordinates are an xarray Dataset)
    except ImportError:
        return None
    training = fitted["_training"]
    return grid_from_record(record, training.coords.shape[0], training.y.shape[1])


def _check_fitted_transform(transform):
    """ValueError unless `transform` is None or a transform with nothing to estimate."""
    if transform is not None and not (
        isinstance(transform, Transform) and not transform.n_estimated
    ):
        raise ValueError(
            f"transform_ is a {type(transform).__name__}, not a fitted target transform"
        )


def _path_argument(path):
    """`path` (str, bytes or os.PathLike) as a str; TypeError otherwise."""
    try:
        return os.fsdecode(path)
    except TypeError:
        raise TypeError(
            f"path must be a file name (str, bytes or os.PathLike); got {type(path).__name__}."
        ) from None


def _check_saved_settings(model):
    """Raise ValueError or TypeError for a setting of a loaded model that `fit` refuses."""
    model._check_settings()
    check_choice(model.device, "device", DEVICES)
    Trend.parse(model.trend)
    if not (isinstance(model.distance, str) and model.distance.strip().lower() == "auto"):
        get_distance(model.distance)
    ParameterSpace(
        get_kernel(model.kernel, model.smoothness),
        nugget=model.nugget,
        fixed=check_mapping(model.fixed, "fixed", "{'range': 100.0}"),
        bounds=check_mapping(model.bounds, "bounds", "{'range': (1.0, 500.0)}"),
    )


def _available_backend(device):
    """The back end of `device`, or the CPU's where that device is not available here."""
    try:
        return get_backend(device)
    except ValueError:
        return get_backend("cpu")


def _perturbation_at(likelihood, params):
    """``(relative ||E||_F, shift in covariance units)`` of the factors at `params`
    (largest over groups); no refactorization when no evaluation needed a shift."""
    if likelihood.n_safeguarded == 0:
        return 0.0, 0.0
    factors = likelihood.factors_at(params)
    relative = max(f.relative_perturbation for f in factors)
    shift = max(f.shift for f in factors) * params["variance"]
    return float(relative), float(shift)


#: A fixed nugget above this multiple of the data variance contradicts the data (whose
#: variance includes the nugget) beyond any sampling error: a mistake of units.
LARGEST_FIXED_NUGGET = 1e6


def _relative_params(params, data_variance):
    """Natural `params` with the variance and nugget as shares of the detrended data
    variance: free of the data's units, so that a fit of transformed data can start there
    (:func:`_warm_start`)."""
    return {
        name: value / data_variance if name in ("variance", "nugget") else value
        for name, value in params.items()
    }


def _warm_start(space, relative):
    """The optimizer's vector of `space` at the parameters `relative` to the data variance
    (:func:`_relative_params`), each value within the space's bounds."""
    values = dict(relative)
    for name in ("variance", "nugget"):
        values[name] = relative[name] * space.data_variance
    values["ratio"] = relative["nugget"] / relative["variance"]
    within = {
        name: float(np.clip(values[name], *space.natural_bounds[name])) for name in space.names
    }
    return space.to_z(within)


def _check_sites_and_nugget(coords, likelihood, space, data_variance, noise=None):
    """Raise ValueError for a fixed nugget far above the data variance, for sites all at
    one place, and for a nearest pair of sites within
    :data:`~geostat.likelihood.failure.NEGLIGIBLE` of the largest separation when the
    held nugget plus the pair's known `noise` is negligible against the data variance:
    that covariance is singular in floating point. (The twins' block
    ``[[v + n_i, v], [v, v + n_j]]`` has determinant ``v (n_i + n_j) + n_i n_j``.)"""
    if likelihood.max_distance == 0.0:
        raise ValueError(
            "all sites of X are at the same place: no spatial covariance can be estimated."
        )
    nugget = space.nugget_value
    if nugget is not None and nugget > LARGEST_FIXED_NUGGET * data_variance:
        raise ValueError(
            f"nugget={nugget:g} is {nugget / data_variance:.3g} times the variance of y "
            f"around its trend ({data_variance:.3g}), but the nugget is part of that "
            "variance: check the units of y and of the nugget, or use nugget=True to "
            "estimate it."
        )
    if nugget is None or nugget > NEGLIGIBLE * data_variance:
        return
    i, j, gap = nearest_pair(coords, likelihood.distance)
    if gap > NEGLIGIBLE * likelihood.max_distance:
        return
    known = 0.0 if noise is None else float(noise[i] + noise[j])
    if nugget + known > NEGLIGIBLE * data_variance:
        return
    apart = (
        "at the same place"
        if gap == 0
        else f"{gap:.3g} apart ({gap / likelihood.max_distance:.2g} of the largest separation)"
    )
    without = "" if noise is None else " and no known noise_variance at either"
    raise ValueError(
        f"X has duplicate sites: rows {i} and {j} are {apart}. With the nugget held at "
        f"{nugget:g} (negligible against the data variance {data_variance:.3g}){without} "
        "their covariance is singular. Use nugget=True to estimate the nugget, or average "
        "the observations of each site."
    )


def _log_fit(model, likelihood, result):
    """The INFO records of a fit: ranks and memory of the TLR factors at the estimate,
    diagonal shifts, and the estimates (in the units of ``y``)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    factors = likelihood.describe_factors()
    if factors:
        logger.info("TLR factors at the estimate: %s", factors)
    if model.n_safeguarded_:
        logger.info(
            "%d factorizations needed a diagonal shift; at the estimate the shift is %.3g "
            "(||E||_F / ||K||_F = %.3g)",
            model.n_safeguarded_,
            model.shift_,
            model.perturbation_,
        )
    estimates = ", ".join(
        f"{name}={value:.6g} "
        + (f"(se {model.stderr_[name]:.3g})" if name in result.estimated else "(fixed)")
        for name, value in model.params_.items()
    )
    logger.info(
        "estimates: %s; loglik %.10g%s; %d evaluations on the full data, "
        "%d on subsamples or blocks; %s; %.1f s",
        estimates,
        model.loglik_,
        f" (the exact maximum at most {result.gap_bound:.2g} above, 95%)"
        if result.method == "tlr"
        else "",
        result.n_evaluations,
        result.n_pilot_evaluations,
        "converged" if model.converged_ else f"not converged ({result.message})",
        result.elapsed,
    )


def _warn_if_loglik_unsettled(error, accuracy):
    """Warn when the estimated TLR error of the log-likelihood at the estimate stayed
    above :data:`~geostat.optimize.search.LOGLIK_TOLERANCE` down to the finest accuracy."""
    if error > LOGLIK_TOLERANCE:
        warnings.warn(
            "the log-likelihood at the estimate did not settle: its estimated TLR error is "
            f"still {error:.3g} at accuracy {accuracy:.0e} (the target is "
            f"{LOGLIK_TOLERANCE}), so loglik_ and the estimates are not reliable. The "
            "covariance is numerically singular there and its compression error dominates "
            "the likelihood; estimate a nugget, bound the range, or fit with "
            "method='exact'.",
            GeostatWarning,
            stacklevel=3,
        )


def _warn_if_perturbed(relative, shift, data_variance, accuracy, params):
    """Warn when the factorization at the estimate changed the covariance by more than
    :func:`~geostat.likelihood.failure.warning_threshold`, relative to ``||K||_F`` or
    (the shift) to the data variance."""
    threshold = warning_threshold(accuracy)
    if relative > threshold or shift > threshold * data_variance:
        where = "at accuracy " + format(accuracy, "g") if accuracy else "in floating point"
        warnings.warn(
            f"the covariance at the estimate is not positive definite {where}; it was "
            f"factored with a diagonal shift of {shift:.3g} "
            f"({shift / data_variance:.2g} of the data variance; "
            f"||E||_F / ||K||_F = {relative:.2g}; the threshold is {threshold:g}), "
            "i.e. the estimates are those of a model with nugget "
            f"{params.get('nugget', 0.0):.3g} + {shift:.3g}. "
            "Tighten the accuracy, estimate a nugget, or bound the range; on_failure='step' "
            "avoids such parameters instead.",
            PerturbationWarning,
            stacklevel=3,
        )
