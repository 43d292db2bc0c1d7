"""Per-group breakdowns: Jain's index by its formula, each request judged by its
class's own SLO, and no keys at all for a point without groups."""

import pytest

from tokenbench.config.mix import WorkloadMix
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.groups import GroupBreakdowns, group_breakdowns, jain
from tokenbench.records import Group, Outcome, RequestRecord


def test_jains_index():
    assert jain([2.0, 2.0, 2.0]) == 1.0
    assert jain([1.0, 0.0]) == 0.5  # one of two got everything: 1/n
    assert jain([1.0, 3.0]) == pytest.approx(16 / (2 * 10))
    assert jain([]) is None and jain([0.0, 0.0]) is None


def _record(i: int, cls: str, tenant: str, ttft_s: float) -> RequestRecord:
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=0.0,
        sent_s=0.0,
        chunk_times_s=[ttft_s, ttft_s + 0.1],
        end_s=ttft_s + 0.1,
        outcome=Outcome.OK,
        output_tokens=2,
        group=Group(request_class=cls, tenant=tenant, priority=0 if cls == "a" else 1),
    )


def test_each_request_is_judged_by_its_classs_own_slo():
    mix = WorkloadMix.model_validate(
        {"classes": [{"name": "a", "share": 1, "slo": "ttft=1s"}, {"name": "b", "share": 1, "slo": "ttft=100ms"}]}
    )
    records = [_record(i, "a" if i % 2 else "b", "t1" if i % 2 else "t2", 0.5) for i in range(10)]
    parts = group_breakdowns(records, 10.0, SLOConfig(), mix)
    by_class = parts.by_class
    assert by_class is not None
    assert by_class["a"].good_fraction == 1.0 and by_class["b"].good_fraction == 0.0  # 0.5 s TTFT
    assert by_class["a"].goodput_per_s == 0.5 and by_class["a"].requests_per_s == 0.5
    assert by_class["b"].slo is not None and by_class["b"].slo.ttft_s == 0.1 and by_class["b"].priority == 1
    fair = parts.fairness
    assert fair is not None
    assert fair.over == "goodput_per_share" and fair.jain_index == 0.5  # one tenant got all the good service
    assert parts.by_adapter is None and parts.by_tenant is not None and sorted(parts.by_tenant) == ["t1", "t2"]


def test_a_point_without_groups_has_no_group_keys():
    plain = [RequestRecord(point=0, id=i, scheduled_s=0.0, outcome=Outcome.OK) for i in range(3)]
    assert group_breakdowns(plain, 1.0, SLOConfig(ttft_s=1.0), None) == GroupBreakdowns()
