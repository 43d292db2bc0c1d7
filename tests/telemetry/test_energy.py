"""telemetry/energy.py: the GPUs' energy over a window from scripted NVML readings (known answers),
and without a GPU a reason with every figure None, never 0."""

import pytest

from tokenbench.telemetry.energy import point_energy

GPU = {"gpu": {"available": True, "reason": None}}


def scrape(t, *rows):
    """A scrape line with one row per GPU: dicts of readings (energy_mj, power_w)."""
    return {"kind": "scrape", "t_s": t, "gpu": [{"index": i, **r} for i, r in enumerate(rows)]}


def steady(watts, times, start_mj=7_000_000):
    """Counter readings of a GPU drawing ``watts`` all along (1 W for 1 s is 1000 mJ)."""
    return [{"energy_mj": start_mj + int(watts * 1000 * t), "power_w": watts} for t in times]


TIMES = [0.0, 1.0, 2.0, 3.0, 4.0]


def test_the_counter_gives_the_windows_joules_and_joules_per_token():
    samples = [scrape(t, r) for t, r in zip(TIMES, steady(100.0, TIMES))]
    e = point_energy(samples, GPU, 0.5, 3.5, output_tokens_per_s=50.0)
    # 100 W over the 3 s window (interpolated at its edges): 300 J; 100 W / 50 tok/s = 2 J a token
    assert e.model_dump() == {
        "available": True,
        "reason": None,
        "source": "nvml_total_energy",
        "gpus": 1,
        "period_s": [0.5, 3.5],
        "joules": pytest.approx(300.0),
        "mean_power_w": pytest.approx(100.0),
        "joules_per_output_token": pytest.approx(2.0),
    }


def test_every_gpu_is_summed():
    samples = [scrape(t, a, b) for t, a, b in zip(TIMES, steady(100.0, TIMES), steady(50.0, TIMES, start_mj=3))]
    e = point_energy(samples, GPU, 1.0, 3.0, output_tokens_per_s=30.0)
    assert (e.gpus, e.joules, e.mean_power_w) == (2, pytest.approx(300.0), pytest.approx(150.0))
    assert e.joules_per_output_token == pytest.approx(5.0)


def test_a_counter_reset_counts_from_zero_never_negative():
    # the driver reloaded between 1 s and 2 s: its counter restarted and read 40 J at 2 s
    readings = [{"energy_mj": 5_000_000}, {"energy_mj": 5_100_000}, {"energy_mj": 40_000}, {"energy_mj": 140_000}]
    samples = [scrape(t, r) for t, r in zip(TIMES, readings)]
    e = point_energy(samples, GPU, 0.0, 3.0, output_tokens_per_s=None)
    assert e.joules == pytest.approx(100.0 + 40.0 + 100.0)
    assert e.joules_per_output_token is None  # no throughput: no per-token figure, not 0


def test_scrapes_outside_the_bracketing_ones_are_not_counted():
    # a reset long before the window, and wild readings long after: neither is the window's
    early = [scrape(-10.0, {"energy_mj": 9_000_000}), scrape(-9.0, {"energy_mj": 10})]
    late = [scrape(20.0, {"energy_mj": 1}), scrape(21.0, {"energy_mj": 99_000_000})]
    inside = [scrape(t, r) for t, r in zip(TIMES, steady(100.0, TIMES))]
    e = point_energy(early + inside + late, GPU, 1.0, 3.0, output_tokens_per_s=10.0)
    assert e.period_s == [1.0, 3.0] and e.joules == pytest.approx(200.0)


def test_without_the_counter_power_is_integrated_and_said_so():
    # power from 100 W to 200 W and back to 100 W: trapezoids of 150 J and 150 J
    samples = [scrape(t, {"power_w": w}) for t, w in ((0.0, 100.0), (1.0, 200.0), (2.0, 100.0))]
    e = point_energy(samples, GPU, 0.0, 2.0, output_tokens_per_s=15.0)
    assert (e.source, e.joules, e.mean_power_w) == ("power_integral", pytest.approx(300.0), pytest.approx(150.0))
    assert e.joules_per_output_token == pytest.approx(10.0)


def test_a_window_the_readings_do_not_bracket_covers_what_they_cover():
    samples = [scrape(t, r) for t, r in zip([2.0, 3.0, 4.0], steady(100.0, [2.0, 3.0, 4.0]))]
    e = point_energy(samples, GPU, 1.0, 3.5, output_tokens_per_s=100.0)
    assert e.period_s == [2.0, 3.5] and e.joules == pytest.approx(150.0) and e.mean_power_w == pytest.approx(100.0)


def test_without_a_gpu_every_figure_is_none_with_the_reason():
    header = {"gpu": {"available": False, "reason": "NVMLError_LibraryNotFound: NVML Shared Library Not Found"}}
    e = point_energy([scrape(0.0), scrape(1.0)], header, 0.0, 1.0, output_tokens_per_s=100.0)
    assert e.model_dump() == {
        "available": False,
        "reason": "no NVIDIA GPU (NVML: NVMLError_LibraryNotFound: NVML Shared Library Not Found)",
        "source": None,
        "gpus": None,
        "period_s": None,
        "joules": None,
        "mean_power_w": None,
        "joules_per_output_token": None,
    }
    assert point_energy([], None, 0.0, 1.0, 1.0).reason == "no NVIDIA GPU (NVML: not sampled)"


def test_too_few_readings_is_unavailable_not_zero():
    one = [scrape(0.5, {"energy_mj": 1000, "power_w": 10.0})]
    e = point_energy(one, GPU, 0.0, 1.0, output_tokens_per_s=1.0)
    assert e.available is False and e.joules is None and "fewer than 2" in (e.reason or "")
    # readings that all lie after the window: nothing of it is covered
    after = [scrape(t, r) for t, r in zip([5.0, 6.0], steady(10.0, [5.0, 6.0]))]
    assert point_energy(after, GPU, 0.0, 1.0, 1.0).available is False
