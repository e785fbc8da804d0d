"""The steps of Fisher scoring (geostat.optimize.scoring): the curvature corrected along the
last steps, projected steps on the bounds, the check of a final step, and the starts off the
nugget plateau (geostat.optimize.search)."""

import numpy as np
import pytest

import geostat.optimize.scoring as scoring
import geostat.optimize.search as search
from geostat.kernels import get_kernel
from geostat.optimize import ParameterSpace


def _information(rng, k=3):
    basis = np.linalg.qr(rng.standard_normal((k, k)))[0]
    return basis @ np.diag(rng.uniform(0.5, 4.0, k)) @ basis.T


def _relative(info, rng):
    """The matrices of given eigenvalues relative to `info` in a random basis."""
    root = np.linalg.cholesky(info)
    basis = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    return lambda ratios: root @ basis @ np.diag(ratios) @ basis.T @ root.T


def test_the_curvature_takes_the_secant_along_the_last_step_and_the_information_elsewhere(rng):
    info = _information(rng)
    hessian = info + 0.8 * np.outer(info[:, 0], info[:, 0])  # more curved than I
    step = rng.standard_normal(3)
    before = rng.standard_normal(3)
    score = before - hessian @ step  # the scores of a quadratic log-likelihood
    curvature = scoring._curvature(info, score, [(step, before)])
    assert step @ curvature @ step == pytest.approx(step @ hessian @ step, rel=1e-12)
    # directions I-orthogonal to the step keep the information's curvature
    other = np.linalg.svd((info @ step)[None, :])[2][1:]
    np.testing.assert_allclose(
        other @ curvature @ other.T, other @ info @ other.T, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(curvature, curvature.T)
    assert scoring._curvature(info, score, []) is info


@pytest.mark.parametrize(
    "secant_scale, rho", [(100.0, scoring.CURVATURE_MAX), (1e-3, scoring.CURVATURE_MIN)]
)
def test_the_correction_is_clipped_and_skipped_where_the_secant_is_not_positive(
    rng, secant_scale, rho
):
    info = _information(rng)
    step = rng.standard_normal(3)
    before = np.zeros(3)
    score = -secant_scale * info @ step
    curvature = scoring._curvature(info, score, [(step, before)])
    assert step @ curvature @ step == pytest.approx(rho * step @ info @ step, rel=1e-12)
    np.testing.assert_allclose(
        scoring._curvature(info, -score, [(step, before)]), info, rtol=1e-12, atol=1e-12
    )


def test_an_observed_information_within_the_bounds_is_the_curvature_and_clipped_beyond(rng):
    """The observed information of the start (the block Vecchia fit's) replaces the
    expected one where their ratios lie in [CURVATURE_MIN, CURVATURE_MAX]; beyond, the
    ratio is clipped, and a non-positive direction keeps the expected information."""
    info = _information(rng)
    relative = _relative(info, rng)
    score = rng.standard_normal(3)
    observed = relative([0.35, 1.0, 1.8])
    np.testing.assert_allclose(scoring._curvature(info, score, [], observed), observed, rtol=1e-10)
    np.testing.assert_allclose(
        scoring._curvature(info, score, [], relative([10.0, -2.0, 0.01])),
        relative([scoring.CURVATURE_MAX, 1.0, scoring.CURVATURE_MIN]),
        rtol=1e-10,
        atol=1e-12,
    )


def _quadratic_history(hessian, steps, start):
    """Steps and the scores before each on a quadratic log-likelihood of curvature
    `hessian` (score ``g - H s`` after a step), and the score at the end."""
    history, score = [], start
    for step in steps:
        history.append((step, score))
        score = score - hessian @ step
    return history, score


@pytest.mark.parametrize("observed", [None, 1.5])
def test_as_many_independent_steps_as_coordinates_give_the_hessian(rng, observed):
    """Secants in every direction: the multi-secant curvature is the quadratic's Hessian
    (within the clip: its eigenvalues relative to I between 0.5 and 2), whether they
    correct the expected information or an observed one."""
    info = _information(rng)
    hessian = _relative(info, rng)([0.5, 1.3, 2.0])
    history, score = _quadratic_history(
        hessian, rng.standard_normal((3, 3)), rng.standard_normal(3)
    )
    prior = None if observed is None else observed * info
    np.testing.assert_allclose(
        scoring._curvature(info, score, history, prior), hessian, rtol=1e-10, atol=1e-10
    )


def test_a_step_along_newer_ones_is_left_out(rng):
    """An older step within SECANT_ANGLE of the span of the newer ones adds nothing (its
    secant would make the small system ill-conditioned): the curvature is that of the
    newest step alone."""
    info = _information(rng)
    hessian = 2.0 * info
    newest = rng.standard_normal(3)
    older = 3.0 * newest + 1e-3 * rng.standard_normal(3)
    history, score = _quadratic_history(hessian, [older, newest], rng.standard_normal(3))
    alone = scoring._curvature(info, score, history[1:])
    np.testing.assert_allclose(scoring._curvature(info, score, history), alone, rtol=1e-12)
    assert newest @ alone @ newest == pytest.approx(2.0 * newest @ info @ newest, rel=1e-12)


def test_a_coordinate_on_its_bound_pushing_out_is_held_and_the_others_step():
    bounds = np.array([[-5.0, 5.0], [-20.0, 7.0]])
    info = np.array([[2.0, 0.5], [0.5, 1.0]])
    covariance = 0.01 * np.eye(2)
    z = np.array([0.0, -20.0])
    out = np.array([0.4, -3.0])  # the second coordinate wants to go below its bound
    step, gain, loss = scoring._projected_step(z, out, info, covariance, bounds)
    assert step[1] == 0.0 and step[0] == pytest.approx(0.4 / 2.0)
    assert gain == pytest.approx(0.5 * 0.4**2 / 2.0) and loss == pytest.approx(0.5 * 0.01 / 2.0)
    inward = np.array([0.4, 3.0])
    step, gain, _ = scoring._projected_step(z, inward, info, covariance, bounds)
    np.testing.assert_allclose(step, np.linalg.solve(info, inward))
    held = scoring._projected_step(
        np.array([5.0, -20.0]), np.array([1.0, -1.0]), info, covariance, bounds
    )
    assert held[1] == held[2] == 0.0 and not held[0].any()


def test_the_gain_left_by_a_final_step_follows_from_its_increase():
    # increase = (2 - rho) * gain leaves (1 - rho)^2 / rho of the gain, at least FINAL_GAIN_LEFT
    for rho in (0.3, 0.5, 0.7, 1.0, 1.5, 1.9):
        left = scoring._gain_left((2 - rho) * 0.01, 0.01)
        assert left == pytest.approx(0.01 * max(scoring.FINAL_GAIN_LEFT, (1 - rho) ** 2 / rho))
    # within a margin, the worst curvature the increase allows
    assert scoring._gain_left(0.01, 0.01, margin=0.005) == pytest.approx(
        0.01 * (1 - 0.5) ** 2 / 0.5
    )
    # a curvature far below the information: no bound from this step, the search goes on
    assert scoring._gain_left((2 - 0.1) * 0.01, 0.01) is None
    # ... unless the margin allows a curvature above CURVATURE_MIN: the worst allowed counts
    rho = scoring.CURVATURE_MIN
    assert scoring._gain_left((2 - 0.1) * 0.01, 0.01, margin=0.002) == pytest.approx(
        0.01 * (1 - rho) ** 2 / rho
    )


def test_a_predicted_gain_above_the_monte_carlo_loss_is_stepped():
    """The predicted gain includes the Monte Carlo loss in expectation: a step leaves the
    loss, no step the true gain. A gain of twice the loss is stepped (on real temperatures
    stopping there left 0.009 below the maximum); one below the loss or the tolerance ends."""
    assert not scoring._settled(0.0019, 0.001)
    assert scoring._settled(0.0009, 0.001) and scoring._settled(0.0015, 0.002)
    assert scoring._settled(0.9 * scoring.GAIN_TOLERANCE, 0.0)


class _RatioObjective:
    """An objective whose value depends only on the log ratio, lowest at `best`."""

    def __init__(self, space, best):
        self.space, self.best, self.calls = space, best, []

    def evaluate(self, z, gradient=False):
        self.calls.append(np.array(z))
        return (z[self.space.names.index("ratio")] - np.log(self.best)) ** 2


def test_a_start_on_the_nugget_plateau_also_tries_larger_ratios():
    space = ParameterSpace(get_kernel("matern", 1.5))
    start = space.to_z({"range": 0.1, "ratio": 1e-8})
    objective = _RatioObjective(space, best=2e-5)
    got = search._off_the_nugget_plateau(objective, space, start)
    assert space.to_natural(got)["ratio"] == pytest.approx(1e-5)
    assert space.to_natural(got)["range"] == pytest.approx(0.1)
    assert len(objective.calls) == 1 + len(search.PLATEAU_TRIALS)
    # a start off the plateau is kept, without evaluations
    objective.calls.clear()
    inside = space.to_z({"range": 0.1, "ratio": 1e-3})
    assert (
        search._off_the_nugget_plateau(objective, space, inside) is inside and not objective.calls
    )


def test_a_refinement_creeping_down_the_plateau_is_stopped():
    """Two iterations each lowering a ratio already below PLATEAU_RATIO by more than
    CREEP_STEP stop the run, with the value there; a ratio that falls above the plateau, or
    by less, or a space without a ratio, does not."""
    from types import SimpleNamespace

    space = ParameterSpace(get_kernel("matern", 1.5))
    r = space.names.index("ratio")

    def iterate(ratio, value=1.0):
        x = np.zeros(len(space.names))
        x[r] = np.log(ratio)
        return SimpleNamespace(x=x, fun=value)

    creeping = search._Creeping(space)
    creeping(iterate(3e-5))
    creeping(iterate(1e-5))
    with pytest.raises(StopIteration):
        creeping(iterate(3e-6, value=-7.0))
    assert creeping.stopped and creeping.value == -7.0 and creeping.index == r
    slow = search._Creeping(space)
    for ratio in (3e-6, 2.9e-6, 2.8e-6, 2.7e-6):  # by less than CREEP_STEP
        slow(iterate(ratio))
    high = search._Creeping(space)
    for ratio in (1e-2, 3e-3, 1e-3, 3e-4):  # above the plateau
        high(iterate(ratio))
    assert not slow.stopped and not high.stopped
    held = search._Creeping(ParameterSpace(get_kernel("matern", 1.5), nugget=False))
    held(iterate(1e-8))
    assert held.index is None and not held.stopped


def test_a_scoring_step_down_the_plateau_goes_to_the_floor_of_a_zero_floor_space():
    space = ParameterSpace(get_kernel("matern", 1.5))
    zero = space.with_zero_floor()
    bounds = np.array(zero.z_bounds())
    r = zero.names.index("ratio")
    on = zero.to_z({"range": 0.1, "ratio": 1e-6})
    step = np.where(np.arange(len(on)) == r, -1.0, 0.3)
    down = scoring._down_the_plateau(zero, on, step, bounds)
    assert on[r] + down[r] == pytest.approx(bounds[r, 0], abs=1e-12)
    np.testing.assert_array_equal(np.delete(down, r), np.delete(step, r))
    # up the plateau, above it, or in a space whose floor is no zero nugget: unchanged
    np.testing.assert_array_equal(scoring._down_the_plateau(zero, on, -step, bounds), -step)
    above = zero.to_z({"range": 0.1, "ratio": 1e-3})
    np.testing.assert_array_equal(scoring._down_the_plateau(zero, above, step, bounds), step)
    np.testing.assert_array_equal(scoring._down_the_plateau(space, on, step, bounds), step)


def test_the_start_carries_its_observed_information_only_where_it_sees_all_the_data(
    monkeypatch,
):
    """Beyond REFINE_SIZE the start is the block Vecchia optimum and scoring's curvature
    starts from its observed information there; with a subset of the blocks kept that is
    another data set's, and none is passed."""
    import geostat as gs
    from geostat.distance import get_distance
    from geostat.likelihood import TLRLikelihood
    from geostat.likelihood.vecchia import BlockVecchiaLikelihood
    from geostat.optimize.objective import Objective
    from geostat.optimize.polish import observed_curvature

    rng = np.random.default_rng(3)
    X = rng.uniform(size=(2400, 2))
    params = {"variance": 1.0, "range": 0.1, "smoothness": 1.5, "nugget": 0.01}
    y = 2 + gs.simulate(X, params, random_state=4, method="exact")
    kernel = get_kernel("matern", 1.5)
    likelihood = TLRLikelihood(
        X, y[:, None], np.ones((2400, 1)), kernel, get_distance("euclidean"), tile_size=400
    )
    space = ParameterSpace(kernel, data_variance=float(np.var(y)))
    start = space.to_z({"range": 0.2, "ratio": 0.05})
    z, curvature, evaluations = search._refined_start(
        likelihood, space, start, np.random.default_rng(0)
    )
    assert evaluations > 0
    again = Objective(BlockVecchiaLikelihood(likelihood, rng=np.random.default_rng(0)), space)
    np.testing.assert_allclose(
        curvature, observed_curvature(again, z, np.array(space.z_bounds())), rtol=1e-10
    )
    assert np.all(np.linalg.eigvalsh(curvature) > 0)  # a maximum

    def some_blocks(likelihood, space, rng):
        return Objective(BlockVecchiaLikelihood(likelihood, max_sites=1280, rng=rng), space)

    monkeypatch.setattr(search, "vecchia_objective", some_blocks)
    assert search._refined_start(likelihood, space, start, np.random.default_rng(0))[1] is None
