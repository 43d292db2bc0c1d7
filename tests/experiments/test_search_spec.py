"""An experiment's search: block: exactly one of load: and search:, its objectives checked when the
file is read, and its expansion into one search cell per (server configuration, variant)."""

import pytest

from tokenbench.config import RateLoad, UsersLoad
from tokenbench.experiments.spec import ExperimentError, expand, parse_spec

BASE = {
    "name": "t",
    "backends": [{"backend": "xllamacpp", "sweep": {"max_num_seqs": [2, 4]}}],
    "search": {"slo": "ttft:p90<=500ms,errors<=1%", "arrival": "constant", "max_probes": 4},
    "stop": {"duration_s": 5},
    "variants": [{"label": "a"}, {"label": "b", "system_prompt": "be brief"}],
    "trials": 3,
}


def test_a_search_experiment_has_one_cell_per_server_and_variant_whose_search_repeats_each_value():
    plans = expand(parse_spec(BASE))
    assert len(plans) == 2
    cells = plans[0].cells
    assert [(c.variant, c.trial) for c in cells] == [("a", 1), ("b", 1)]  # trials live inside the search
    settings = cells[0].search.settings()
    assert (settings.trials, settings.max_probes, settings.variable, settings.tolerance) == (3, 4, "rate", 0.05)
    assert [(o.name, o.stat, o.limit) for o in cells[0].search.objectives()] == [
        ("ttft", "p90", 0.5),
        ("errors", "fraction", 0.01),
    ]
    assert cells[0].config.loads == [RateLoad(rate_per_s=1.0, arrival="constant")]  # the probed load's template


def test_search_trials_alone_sets_the_repeats_and_users_probes_a_closed_loop():
    spec = parse_spec({**BASE, "trials": 1, "search": {"slo": "e2e:p99<=2s", "variable": "users", "trials": 2}})
    cell = expand(spec)[0].cells[0]
    assert cell.search.settings().trials == 2 and cell.search.settings().variable == "users"
    assert cell.config.loads == [UsersLoad(users=1)]


def test_a_load_experiment_has_no_search():
    spec = parse_spec({**{k: v for k, v in BASE.items() if k != "search"}, "load": {"users": [1]}})
    assert all(c.search is None for p in expand(spec) for c in p.cells)


@pytest.mark.parametrize(
    "change, named",
    [
        ({"load": {"users": [1]}}, "exactly one of load: "),  # both
        ({"search": None}, "exactly one of load: "),  # neither
        ({"search": {"slo": "ttft:p91<=500ms"}}, "search.slo: slo part 'ttft:p91<=500ms': unknown statistic"),
        ({"search": {"slo": "ttft:p90>=500ms"}}, "search.slo"),
        ({"search": {"slo": ""}}, "search.slo"),
        ({"search": {"slo": "ttft:p90<=1s", "variable": "tokens"}}, "search.variable"),
        ({"search": {"slo": "ttft:p90<=1s", "tolerance": 0}}, "search.tolerance"),
        ({"search": {"slo": "ttft:p90<=1s", "max_probes": 0}}, "search.max_probes"),
        ({"search": {"slo": "ttft:p90<=1s", "trials": 2}}, "trials (3) and search.trials (2) differ"),
        ({"search": {"slo": "ttft:p90<=1s", "rate": 3}}, "search.rate"),
        ({"dataset": {"name": "trace", "path": "x.jsonl"}}, "dataset trace replays its own schedule"),
    ],
)
def test_a_bad_search_block_is_refused_naming_the_field(change, named):
    data = {**BASE, **change}
    if data.get("search") is None:
        data.pop("search")
    with pytest.raises(ExperimentError) as err:
        parse_spec(data)
    assert named in str(err.value)
