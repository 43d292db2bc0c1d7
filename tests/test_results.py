"""results.json as types: the committed schema is the types', a written file validates against it,
and its public keys are pinned (a key is added on purpose, never renamed or dropped by accident)."""

import json

import jsonschema
import pytest
from pydantic import ValidationError

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.config.slo import SLOConfig
from tokenbench.results import SCHEMA_PATH, SCHEMA_VERSION, PointResult, RunResults, schema
from tokenbench.run import run

# Every key results.json may have (dotted; [] is a list's items; {} a mapping's values). Adding a
# key adds a line here; removing or renaming one needs a migration and a note (docs/results.md).
PUBLIC_KEYS = """
schema_version tool.name tool.version computed_by.name computed_by.version computed_by.how
target.url target.model target.api target.ignore_eos target.backend target.engine target.engine_version
target.cold_start_s target.cold_start_includes target.command target.command_env target.knobs
target.engine_model target.log target.upstream target.replicas
dataset.name dataset.num_requests dataset.exact_lengths dataset.tokenizer dataset.system_prompt
dataset.unique_prefix dataset.source dataset.trace.format dataset.trace.sha256 dataset.trace.num_rows
dataset.trace.num_rows_used dataset.trace.block_size dataset.trace.num_failed_skipped
dataset.trace.num_filtered_out dataset.trace.expected_reuse.num_blocks dataset.trace.expected_reuse.num_blocks_reused
dataset.trace.expected_reuse.num_tokens dataset.trace.expected_reuse.num_tokens_reused
dataset.trace.expected_reuse.token_fraction dataset.trace.expected_reuse.block_fraction dataset.trace.token_ids
dataset.trace.clock dataset.trace.first_row_s dataset.trace.time_origin dataset.trace.left_out
dataset.trace.num_truncated dataset.trace.num_images_not_sent dataset.trace.max_model_len dataset.trace.over_context
points[].trace.num_rows_sent points[].trace.left_out points[].trace.num_truncated points[].trace.num_failed_skipped
points[].trace.num_filtered_out points[].trace.num_images_not_sent points[].trace.expected_reuse.num_blocks
points[].trace.expected_reuse.num_blocks_reused points[].trace.expected_reuse.num_tokens
points[].trace.expected_reuse.num_tokens_reused points[].trace.expected_reuse.token_fraction
points[].trace.expected_reuse.block_fraction slo.ttft_s slo.tpot_s slo.e2e_s
clock.origin_monotonic_s clock.origin_unix_s clock.unit telemetry.samples telemetry.metrics_url
telemetry.interval_s interrupted
points[].index points[].label points[].interrupted points[].window_s points[].rate_period_s
points[].backlog_growth_s points[].offered_per_s points[].queue_s_censored points[].output_tokens
points[].cancelled_output_tokens points[].cancelled_streams
points[].output_tokens_per_s points[].total_tokens_per_s points[].prompt_tokens_source
points[].requests_per_s points[].goodput_per_s points[].good_fraction
points[].load.kind points[].load.users points[].load.ramp_up_s points[].load.think_time_s
points[].load.rate_per_s points[].load.arrival points[].load.burstiness points[].load.max_concurrency
points[].load.speed points[].load.start_s points[].load.end_s points[].load.jitter_s
points[].load.warmup_s points[].load.duration_s points[].load.max_requests
points[].span.start_s points[].span.ramp_end_s points[].span.load_end_s points[].span.end_s
points[].window.start_s points[].window.end_s
points[].populations.distributions points[].populations.rates points[].populations.goodput
points[].concurrency.mean points[].concurrency.peak
points[].tokens.output_tokens_source points[].tokens.eos_counted_not_streamed
points[].tokens.server_vs_client.compared points[].tokens.server_vs_client.mismatched
points[].tokens.server_vs_client.mean_client_minus_server
predicted.model predicted.replicas predicted.routing predicted.knobs predicted.interval predicted.validation_run
predicted.validation_error predicted.simulated_s predicted.preemptions
""".split()
REQUESTS = "total ok by_outcome retries retried_requests ok_without_end_marker".split()
DISTRIBUTION = "count mean std min p50 p90 p95 p99 p999 max".split()
SERVER = """period_s scrapes failed_scrapes first_scrape_error bracket_s bracket_received_s bracketed
preemptions generated_tokens prefix_cache_hits prefix_cache_queries prefix_cache_hit_rate
running.mean running.max waiting.mean waiting.max kv_usage.mean kv_usage.max ttft_s_mean ttft_count
itl_s_mean itl_count client_ttft_s_matched.mean client_ttft_s_matched.count
client_ttft_s_matched.period_s client_ttft_s_matched.uncertain""".split()
GPU = "available reason util_pct.mean util_pct.max power_w.mean power_w.max mem_used_bytes_max".split()
WINDOW = """start_s end_s ramp active_users in_flight requests_per_s output_tokens_per_s ttft_s_mean
ttft_s_p90 errors cancelled server_running server_waiting server_kv_usage server_preemptions
gpu_util_pct target_level""".split()
PUBLIC_KEYS += [f"points[].{r}.{k}" for r in ("requests", "requests_in_window") for k in REQUESTS]
PUBLIC_KEYS += [
    f"points[].{d}.{k}"
    for d in ("ttft_s", "tpot_s", "decode_speed_tokens_per_s", "itl_s", "e2e_s", "queue_s", "normalized_latency_s")
    for k in DISTRIBUTION
]
PUBLIC_KEYS += [f"points[].{s}.{k}" for s in ("server", "server_whole_point") for k in SERVER]
PUBLIC_KEYS += [f"points[].{g}.{k}" for g in ("gpu", "gpu_whole_point") for k in GPU]
PUBLIC_KEYS += [f"points[].server_cpu.{k}" for k in "period_s cpu_s cores_mean processes bracketed".split()]
# which model the server served (clients/served_model.py): its card, llama.cpp's /props, the fingerprint
PUBLIC_KEYS += [
    f"target.served_model.{k}"
    for k in "id root parent max_model_len owned_by created model_path n_ctx fingerprint fingerprint_tokens".split()
]
PUBLIC_KEYS += ["target.served_model.probes"]
PUBLIC_KEYS += [f"imported.{k}" for k in "tool version file sha256 imported_by not_recorded".split()]
PUBLIC_KEYS += [
    f"imported.points[].figures[].{k}"
    for k in "metric tool_name tool_value tokenbench_value difference same_definition definition".split()
]
PUBLIC_KEYS += [
    "imported.points[].index",
    "imported.points[].warnings",
    "imported.points[].requests",
    "imported.points[].failures",
]
PUBLIC_KEYS += ["imported.aggregate_only", "imported.measured_by"]
PUBLIC_KEYS += [f"points[].timeseries[].{k}" for k in WINDOW]
# a staged point (metrics/stages.py): its stages as asked, and its results stage by stage
PUBLIC_KEYS += [f"points[].load.{k}" for k in ("start_level", "shape")]
PUBLIC_KEYS += [f"points[].load.stages[].{k}" for k in ("duration_s", "rate_per_s", "users", "ramp_s")]
STAGE = """index start_s end_s target_rate_per_s target_users ramp_s population requests ok failed offered_per_s
requests_per_s output_tokens_per_s good_fraction backlog.at_start backlog.at_end backlog.peak
backlog.growth_per_s backlog.drain_s""".split()
PUBLIC_KEYS += [f"points[].stages[].{k}" for k in STAGE]
PUBLIC_KEYS += [f"points[].stages[].{d}.{k}" for d in ("ttft_s", "itl_s", "e2e_s") for k in DISTRIBUTION]
# reasoning models (only on a point where reasoning streamed) and shared-prefix synthetic prompts
PUBLIC_KEYS += [f"points[].ttfo_s.{k}" for k in DISTRIBUTION]
PUBLIC_KEYS += [
    f"points[].reasoning.{k}"
    for k in ("requests", "chunks", "reasoning_only", "reasoning_tokens", "reasoning_tokens_reported")
]
PUBLIC_KEYS += [f"dataset.shared_prefix.{k}" for k in ("groups", "tokens", "skew")]
PUBLIC_KEYS += [
    f"dataset.shared_prefix.expected_reuse.{k}"
    for k in ("num_blocks", "num_blocks_reused", "num_tokens", "num_tokens_reused", "token_fraction", "block_fraction")
]
# --dataset sharegpt only: whose sampling drew the prompts (--sharegpt-sampling)
PUBLIC_KEYS += ["dataset.sharegpt_sampling"]
# --multi-turn runs only (datasets.sessions, metrics.sessions, session_load)
PUBLIC_KEYS += "dataset.sessions.conversations dataset.sessions.turns dataset.sessions.history_tokens".split()
PUBLIC_KEYS += [f"points[].by_turn[].{k}" for k in ("turn_index", "count")]
# routing: per-group breakdowns (dicts keyed by adapter, class, tenant) and fairness
PUBLIC_KEYS += "points[].by_adapter points[].by_class points[].by_tenant".split()
PUBLIC_KEYS += [f"points[].fairness.{k}" for k in ("jain_index", "over", "tenants", "values")]
# server spans: the client's HTTP phases (every run) and the server's phases from its spans (--server-traces)
PUBLIC_KEYS += ["points[].http_phases"]
SERVER_PHASES = """requests joined joined_share spans failed_with_span late_spans unknown_spans unknown_attributes
receiver phases clock.offset_s clock.low_s clock.high_s clock.method slowest.requests slowest.ttft_from_s
slowest.mean_s""".split()
PUBLIC_KEYS += [f"points[].server_phases.{k}" for k in SERVER_PHASES]
# autoscaling: a run that polled a scaler (--scaler-url; results/scaling.py)
SCALING = """source interval_s period_s polls failed_polls max_poll_gap_s replica_seconds mean_running_replicas
max_running_replicas timeline[].t_s timeline[].running timeline[].other timeline[].desired transitions[].t_s
transitions[].replica transitions[].from_state transitions[].to_state scale_downs[].replica
scale_downs[].stopping_s scale_downs[].gone_s""".split()
SCALE_UP = """replica step_s seen_s running_s first_request_s lag_seen_s lag_running_s lag_first_request_s""".split()
SCALE_UP += [
    f"{w}.{k}"
    for w in ("slo_before", "slo_during", "slo_after")
    for k in ("period_s", "requests", "good", "attainment")
]
PUBLIC_KEYS += [f"points[].scaling.{k}" for k in SCALING]
PUBLIC_KEYS += [f"points[].scaling.scale_ups[].{k}" for k in SCALE_UP]
PUBLIC_KEYS += [f"points[].by_turn[].{d}.{k}" for d in ("ttft_s", "e2e_s", "prompt_tokens") for k in DISTRIBUTION]
PUBLIC_KEYS += [
    f"points[].sessions.{k}"
    for k in ("started", "completed", "ended_by_error", "ended_by_history_limit", "ended_by_stop")
]
PREFIX_CACHE = "reset reset_detail hit_rate hit_rate_source hit_rate_requests expected_reuse".split()
PUBLIC_KEYS += [f"points[].prefix_cache.{k}" for k in PREFIX_CACHE]
# a run given a price (--cost-per-hour; cost.py) and every point's GPU energy (telemetry.energy)
COST = """usd_per_gpu_hour gpus usd_per_hour usd_per_million_output_tokens usd_per_million_total_tokens
replica_seconds usd_for_replica_seconds""".split()
PUBLIC_KEYS += [f"points[].cost.{k}" for k in COST]
ENERGY = "available reason source gpus period_s joules mean_power_w joules_per_output_token".split()
PUBLIC_KEYS += [f"points[].energy.{k}" for k in ENERGY]
# latency per token (metrics.pertoken): per-token ITL and the fluidity index
PUBLIC_KEYS += [f"points[].itl_per_token_s.{k}" for k in DISTRIBUTION]
PUBLIC_KEYS += [f"points[].fluidity.{k}" for k in ("ttft_deadline_s", "tbt_deadline_s", "miss_rate", "tokens_from")]
PUBLIC_KEYS += [f"points[].fluidity.index.{k}" for k in DISTRIBUTION]
# the client's own health (telemetry.client_health): per point and per time-series window
CLIENT = """workers period_s samples ticks cpu_util_max cpu_util_mean loop_lag_p99_s loop_lag_max_s
connections_max limited limited_by send_lag_p99_s""".split()  # send_lag_p99_s: the compiled client's
PUBLIC_KEYS += [f"points[].client.{k}" for k in CLIENT]
# a run whose load came from several workers (--workers, --ray), and a point during which one died
PUBLIC_KEYS += "workers.mode workers.count workers.ray_address workers.cpus_per_worker".split()
PUBLIC_KEYS += [
    f"workers.clocks[].{k}"
    for k in "worker node pid offset_s uncertainty_s end_offset_s end_uncertainty_s lost".split()
]
PUBLIC_KEYS += [f"points[].workers_lost[].{k}" for k in ("worker", "at_s", "reason", "in_flight")]
PUBLIC_KEYS += [f"points[].errors_seen[].{k}" for k in ("outcome", "status", "text", "count")]
PUBLIC_KEYS += [f"points[].stopped_early.{k}" for k in ("by", "reason", "at_s")]
# autostop: steady state, how a point that judged itself stopped, an over-saturated point's evidence
PUBLIC_KEYS += [f"points[].steady_state.{k}" for k in ("reached", "start_s", "windows", "window_s", "window_start")]
PUBLIC_KEYS += [f"points[].auto_stop.{k}" for k in ("reason", "at_s", "precision_target", "precision", "precise")]
PUBLIC_KEYS += [f"points[].over_saturated.{k}" for k in ("at_s",)]
PUBLIC_KEYS += [
    f"points[].over_saturated.backlog.{k}" for k in ("slope_per_s", "ci95_low", "ci95_high", "span_s", "mean_backlog")
]
PUBLIC_KEYS += [
    f"points[].timeseries[].{k}" for k in ("client_cpu_util", "client_loop_lag_max_s", "client_connections_max")
]
# pooling APIs: a pooling point (--api embeddings, rerank, score; metrics.pooling)
POOLING = "population requests inputs inputs_per_request inputs_per_s prompt_tokens_per_s prompt_tokens_source"
PUBLIC_KEYS += [f"points[].pooling.{k}" for k in POOLING.split()]
# images: only on a point where some request carried images (metrics.images)
IMAGES = "requests images images_per_request image_pixels pixels_per_image images_per_s ok_requests".split()
PUBLIC_KEYS += [f"points[].images.{k}" for k in IMAGES]
PUBLIC_KEYS += [f"points[].images.prompt_tokens.{k}" for k in DISTRIBUTION]
# structured output: (only on a point that asked for structure / offered tools)
PUBLIC_KEYS += [
    f"points[].structured.{k}" for k in ("kind", "requests", "checked", "parsed", "valid", "valid_fraction")
]
PUBLIC_KEYS += [
    f"points[].tool_calls.{k}"
    for k in ("requests", "with_calls", "calls", "args_parsed", "args_parsed_fraction", "call_chunks", "args_tokens")
]
PUBLIC_KEYS += [f"points[].ttftc_s.{k}" for k in DISTRIBUTION]
# a graded dataset: only on a point where some request carried an expected answer (metrics.accuracy)
ACCURACY = "grader requests graded not_graded correct accuracy ci_low ci_high interval".split()
PUBLIC_KEYS += [f"points[].accuracy.{k}" for k in ACCURACY]
# speculative decoding: the server's counters, each point's acceptance from the responses, the
# server's own per-request timing, and tokens per chunk (only where reported)
SERVER_SPECULATION = """drafts draft_tokens accepted_tokens accepted_by_position acceptance_rate acceptance_length
acceptance_rate_by_position""".split()
PUBLIC_KEYS += [f"points[].{s}.speculation.{k}" for s in ("server", "server_whole_point") for k in SERVER_SPECULATION]
PUBLIC_KEYS += [f"points[].speculation.server.{k}" for k in SERVER_SPECULATION]
SPECULATION = """requests source steps draft_tokens accepted_tokens acceptance_rate_token_weighted
acceptance_rate_request_weighted acceptance_length_step_weighted acceptance_length_request_weighted
by_position[].position by_position[].accepted by_position[].drafted by_position[].rate""".split()
PUBLIC_KEYS += [f"points[].speculation.{k}" for k in SPECULATION]
PUBLIC_KEYS += [f"points[].speculation.acceptance_rate.{k}" for k in DISTRIBUTION]
PUBLIC_KEYS += ["points[].server_timing.requests", "points[].server_timing.source"]
PUBLIC_KEYS += [
    f"points[].server_timing.{d}.{k}"
    for d in ("queue_s", "prefill_s", "ttft_s", "ttft_outside_server_s", "decode_s", "itl_s")
    for k in DISTRIBUTION
]
PUBLIC_KEYS += [f"points[].tokens_per_chunk.{k}" for k in DISTRIBUTION]
PUBLIC_KEYS += [
    f"points[].{s}.{k}"
    for s in ("server", "server_whole_point")
    for k in ("requests_finished", "prompt_tokens_computed")
]
# fleets: each replica's requests (a group's figures), its router's count and its own counters
FLEET = "attributed unattributed attributed_from imbalance_over imbalance_max_over_mean imbalance_cv"
PUBLIC_KEYS += [f"points[].fleet.{k}" for k in FLEET.split()]
PUBLIC_KEYS += [f"points[].fleet.replicas[].{k}" for k in ("replica", "routed_requests", "prefix_cache_hit_rate")]
GROUP = "requests ok failed share requests_per_s output_tokens_per_s goodput_per_s good_fraction priority tenant"
PUBLIC_KEYS += [f"points[].fleet.replicas[].requests.{k}" for k in GROUP.split()]
PUBLIC_KEYS += [
    f"points[].fleet.replicas[].requests.{d}.{k}"
    for d in ("ttft_s", "tpot_s", "e2e_s", "queue_s", "normalized_latency_s")
    for k in DISTRIBUTION
]
PUBLIC_KEYS += [f"points[].fleet.replicas[].requests.slo.{k}" for k in ("ttft_s", "tpot_s", "e2e_s")]
PUBLIC_KEYS += [
    "points[].fleet.replicas[].server." + k[len("points[].server.") :]
    for k in list(PUBLIC_KEYS)
    if k.startswith("points[].server.")
]
# agent programs: the sessions read (dataset) and each point's sessions and critical paths
PROGRAM_FACTS = "calls edges formats output programs recorded_session_s subagent_calls time_scale"
PUBLIC_KEYS += [f"dataset.programs.{k}" for k in PROGRAM_FACTS.split()]
PROGRAMS = "by_depth by_role critical_path.mean_s critical_path.share expected_reuse measured_reuse measured_sessions"
PUBLIC_KEYS += [f"points[].programs.{k}" for k in PROGRAMS.split()]
PUBLIC_KEYS += ["points[].programs.sessions_per_s", "points[].programs.good_sessions_per_s"]
PUBLIC_KEYS += ["points[].programs.good_sessions_fraction", "slo.session_s"]
PUBLIC_KEYS += [
    f"points[].programs.sessions.{k}"
    for k in ("started", "completed", "ended_by_error", "ended_by_stop", "calls_not_sent")
]
PUBLIC_KEYS += [
    f"points[].programs.{d}.{k}"
    for d in ("calls_per_session", "critical_path.calls", "schedule_lag_s", "session_s")
    for k in DISTRIBUTION
]


def _declared(model, prefix="") -> set[str]:
    """The dotted keys the models declare (a nested model's fields, not the model's own name)."""
    import typing

    from pydantic import BaseModel

    def submodel(annotation):
        """(model, suffix) when the annotation is a model, a list of models, or either | None."""
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation, "."
        if typing.get_origin(annotation) is list:
            inner = submodel(typing.get_args(annotation)[0])
            return (inner[0], "[].") if inner else None
        for arg in typing.get_args(annotation) if typing.get_origin(annotation) is not dict else ():
            if arg is not type(None) and (found := submodel(arg)):
                return found
        return None

    out = set()
    for name, field in model.model_fields.items():
        found = submodel(field.annotation)
        out |= _declared(found[0], f"{prefix}{name}{found[1]}") if found else {f"{prefix}{name}"}
    return out


def test_the_public_keys_are_pinned():
    declared = _declared(RunResults)
    assert sorted(declared - set(PUBLIC_KEYS)) == [], "a new key: add it to PUBLIC_KEYS (and docs/results.md)"
    assert sorted(set(PUBLIC_KEYS) - declared) == [], "a key was dropped or renamed: that needs a migration"


def test_the_committed_schema_is_the_types():
    committed = json.loads(SCHEMA_PATH.read_text())
    assert committed == schema(), "schemas/results.schema.json is stale: python -m tokenbench.results"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A run's results.json (open loop and closed loop, an SLO, the server's metrics) from a mock
    process, as any reader gets it."""
    import subprocess
    import sys

    from tokenbench.common.procs import free_port, stop, wait_http

    port = free_port()
    mock = subprocess.Popen(
        [sys.executable, "-m", "tokenbench", "mock", "--port", str(port), "--ttft-ms", "10", "--itl-ms", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", 20.0, mock)
        out = tmp_path_factory.mktemp("results") / "run"
        from tokenbench.config import BackendConfig, RateLoad

        cfg = RunConfig(
            target=TargetConfig(url=url),
            backend=BackendConfig(name="vllm", metrics_interval_s=0.2),
            loads=[UsersLoad(users=2), RateLoad(rate_per_s=20)],
            stop=StopConfig(duration_s=1.5, drain_timeout_s=5),
            dataset=DatasetConfig(input_tokens=8, output_tokens=6, num_prompts=4),
            slo=SLOConfig(ttft_s=1.0),
            live=False,
            out_dir=out,
        )
        run(cfg)
    finally:
        stop(mock, grace_s=10)
    return json.loads((out / "results.json").read_text())


def test_a_written_results_json_validates_against_the_committed_schema(written):
    jsonschema.validate(written, json.loads(SCHEMA_PATH.read_text()))
    assert written["schema_version"] == SCHEMA_VERSION and len(written["points"]) == 2
    assert written["points"][0]["server"]["ttft_s_mean"] is not None  # the optional parts are there too
    # no reasoning streamed: the reasoning parts stay out (the shape of a run before them)
    assert not {"ttfo_s", "reasoning"} & {k for p in written["points"] for k in p}
    assert "shared_prefix" not in written["dataset"]


def test_results_round_trip_through_the_types_unchanged(written):
    assert RunResults.from_json(written).to_json() == written
    old = {k: v for k, v in written.items() if k != "schema_version"}  # written before it existed
    assert RunResults.from_json(old).schema_version == 1


def test_a_key_the_types_do_not_declare_is_refused(written):
    point = dict(written["points"][0], ttft_ms=12.0)
    with pytest.raises(ValidationError, match="ttft_ms"):
        PointResult.model_validate(point)
    schema_doc = json.loads(SCHEMA_PATH.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**written, "points": [point]}, schema_doc)


def test_a_replays_results_json_validates_and_round_trips(mock_server, tmp_path):
    """A trace replay adds load.kind replay with its settings and dataset.trace: in the schema."""
    from replay_helpers import replay_config, write_trace
    from run_helpers import quiet

    from tokenbench.config import ReplayLoad

    trace = write_trace(tmp_path / "trace.jsonl")
    load = ReplayLoad(speed=8, jitter_s=0.2, max_concurrency=2)
    results = run(replay_config(mock_server(ttft_ms=1, itl_ms=1), trace, tmp_path, load), quiet()).results
    jsonschema.validate(results, json.loads(SCHEMA_PATH.read_text()))
    assert RunResults.from_json(results).to_json() == results
    assert results["points"][0]["load"]["jitter_s"] == 0.2 and results["dataset"]["trace"]["block_size"] == 10


def test_shared_prefix_and_reasoning_results_validate_and_round_trip(mock_server, tmp_path):
    """--prefix-groups adds dataset.shared_prefix (its expected reuse over the prompts in order,
    the prefix extra to --input-tokens), a reasoning mock adds ttfo_s and reasoning: in the schema."""
    from run_helpers import quiet, records_of

    from tokenbench.config import RateLoad
    from tokenbench.datasets.shared_prefix import assign_groups, expected_reuse

    cfg = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=1, itl_ms=1, reasoning_chunks=2)),
        loads=[RateLoad(rate_per_s=50)],
        stop=StopConfig(max_requests=12, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=5, output_tokens=4, num_prompts=12, prefix_groups=3, prefix_tokens=20),
        live=False,
        out_dir=tmp_path / "run",
        seed=9,
    )
    result = run(cfg, quiet())
    results = result.results
    jsonschema.validate(results, json.loads(SCHEMA_PATH.read_text()))
    assert RunResults.from_json(results).to_json() == results
    shared = results["dataset"]["shared_prefix"]
    assert (shared["groups"], shared["tokens"], shared["skew"]) == (3, 20, None)
    assert shared["expected_reuse"] == expected_reuse(assign_groups(12, 3, None, 9), 20, 5).model_dump()
    assert all(r["dataset_prompt_tokens"] == 25 for r in records_of(result.run_dir))
    point = results["points"][0]
    assert point["reasoning"]["chunks"] == 2 * point["requests_in_window"]["total"]
    assert point["ttfo_s"]["count"] == point["ttft_s"]["count"] > 0
