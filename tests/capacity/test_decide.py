"""The search's decisions on known sequences of verdicts: no server, no clock."""

from __future__ import annotations

import pytest

from tokenbench.capacity.decide import Bracket, Step, Verdict, next_step


def steps(ceiling, seq, variable="rate", tolerance=0.05, max_probes=8) -> Step:
    return next_step(ceiling, [Verdict(v, p) for v, p in seq], variable, tolerance, max_probes)


def test_first_guess_is_the_ceiling():
    assert steps(10.0, []) == Step(value=10.0)


def test_grows_by_a_quarter_then_bisects_to_the_tolerance():
    seq = [(10.0, True)]
    assert steps(10.0, seq).value == 12.5
    seq.append((12.5, False))
    assert steps(10.0, seq).value == 11.2  # (10 + 12.5) / 2 = 11.25, 3 significant digits
    seq.append((11.2, False))
    assert steps(10.0, seq).value == 10.6
    seq.append((10.6, False))
    assert steps(10.0, seq).value == 10.3
    seq.append((10.3, True))  # (10.6 - 10.3) / 10.3 = 2.9% <= 5%
    assert steps(10.0, seq) == Step(stopped_by="tolerance")


def test_halves_while_failing_down_to_the_floor_then_no_load_passes():
    seq: list[tuple[float, bool]] = []
    probed = []
    while (step := steps(10.0, seq)).value is not None:
        probed.append(step.value)
        seq.append((step.value, False))
    assert probed == [10.0, 5.0, 2.5, 1.25, 0.625, 0.312]  # the floor: 10 / 2**5
    assert step.stopped_by == "no_passing"


def test_passing_far_above_the_ceiling_stops_as_all_passing():
    seq: list[tuple[float, bool]] = []
    probed = []
    while (step := steps(10.0, seq)).value is not None:
        probed.append(step.value)
        seq.append((step.value, True))
    assert probed == [10.0, 12.5, 15.6, 19.5, 20.0]  # capped at 2 x the ceiling
    assert step.stopped_by == "all_passing"


def test_the_budget_stops_before_the_tolerance_is_reached():
    assert steps(10.0, [(10.0, True), (12.5, False)], max_probes=2) == Step(stopped_by="budget")
    # converged at the last probe of the budget: the tolerance is why it stopped
    assert steps(10.0, [(10.0, True), (10.3, False)], max_probes=2) == Step(stopped_by="tolerance")


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ([], Step(value=2.0)),
        ([(2.0, True)], Step(value=3.0)),  # grows by at least one user
        ([(2.0, True), (3.0, False)], Step(stopped_by="tolerance")),  # one user apart
        ([(2.0, False)], Step(value=1.0)),
        ([(2.0, False), (1.0, False)], Step(stopped_by="no_passing")),
        ([(8.0, True), (10.0, False)], Step(value=9.0)),
    ],
)
def test_users_are_whole(seq, expected):
    assert steps(2.0, seq, variable="users") == expected


def test_a_failure_below_a_pass_is_noise_the_bracket_ignores():
    b = Bracket.of([Verdict(5.0, True), Verdict(4.0, False), Verdict(8.0, False), Verdict(9.0, False)])
    assert (b.max_passing, b.min_failing) == (5.0, 8.0)
    assert steps(10.0, [(5.0, True), (4.0, False), (8.0, False)]).value == 6.5


def test_a_value_already_probed_ends_the_search():
    # 0.1 and 0.101: the midpoint rounds to 0.1 (3 significant digits), probed already
    assert steps(0.1, [(0.1, True), (0.101, False)], tolerance=0.001) == Step(stopped_by="tolerance")
