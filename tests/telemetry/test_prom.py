"""Prometheus text -> normalized fields, on real scrapes and hand-written known answers."""

from pathlib import Path

import pytest

from tokenbench.backends import PROFILES
from tokenbench.telemetry.prom import MetricNames, flat, normalize, parse

FIXTURES = Path(__file__).parent.parent / "fixtures"

VLLM_LIKE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 7.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.8
"""


def test_llamacpp_scrape_maps_to_fields():
    samples = parse((FIXTURES / "llamacpp_metrics.txt").read_text())
    values = normalize(samples, PROFILES["llamacpp"].metrics)
    raw = flat(samples)
    assert values["generated_tokens"] == raw["llamacpp:tokens_predicted_total"] == 5
    assert values["running"] == 0 and values["waiting"] == 0
    assert "kv_usage" not in values and "preemptions" not in values  # not exposed: absent, not 0


def test_labels_are_summed_buckets_dropped_and_histograms_read():
    samples = parse(VLLM_LIKE)
    values = normalize(samples, PROFILES["vllm"].metrics)
    assert values["running"] == 5  # two engines' gauges summed
    assert values["kv_usage"] == 0.25 and values["preemptions"] == 7
    assert values["ttft_sum_s"] == pytest.approx(0.8) and values["ttft_count"] == 4
    assert not any(k.endswith("_bucket") or "_bucket{" in k for k in flat(samples))


def test_label_selector_scale_and_first_candidate_wins():
    names = MetricNames(
        running=("absent_metric", 'vllm:num_requests_running{engine="1"}'),
        kv_usage=("vllm:kv_cache_usage_perc",),
        kv_usage_scale=0.01,
        ttft_histogram=("vllm:time_to_first_token_seconds",),
        histogram_scale=0.001,
    )
    values = normalize(parse(VLLM_LIKE), names)
    assert values["running"] == 2
    assert values["kv_usage"] == pytest.approx(0.0025)
    assert values["ttft_sum_s"] == pytest.approx(0.0008)


def test_text_that_is_not_prometheus_raises():
    with pytest.raises(ValueError):
        parse("<html>not metrics</html>\n")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_metric_name_is_well_formed(name):
    metrics = PROFILES[name].metrics
    if metrics is None:
        return
    for candidates in {**metrics.fields(), **metrics.histograms()}.values():
        for candidate in candidates:
            assert " " not in candidate and candidate.count("{") == candidate.count("}")


def test_kv_usage_is_averaged_across_label_sets_not_summed():
    """Audit 9: data parallel 2, two engines at 0.6 each: 60% used, not 120%."""
    text = VLLM_LIKE.replace(
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6',
    )
    values = normalize(parse(text), PROFILES["vllm"].metrics)
    assert values["kv_usage"] == pytest.approx(0.6)
    assert values["running"] == 5  # counts of requests are still summed
