"""A fleet's plumbing against the scripted mock, no router: a replica that names itself in its
response header (the mock's --served-by, as a proxy's $upstream_addr would) and is scraped as a
replica (--replica-url): each record names it, its counters are read beside, and the point's
fleet figures equal the script."""

import subprocess

import pytest
from run_helpers import config, mock_command, quiet, records_of

from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import BackendConfig, StopConfig, UsersLoad
from tokenbench.run import run
from tokenbench.telemetry.sampler import SamplesFile

REQUESTS = 8


@pytest.fixture(scope="module")
def fleet_of_one(tmp_path_factory):
    port = free_port()
    name = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        mock_command(port, ttft_ms=20, itl_ms=5, served_by=name), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://{name}"
    try:
        wait_http(url + "/health", 20.0, proc)
        cfg = config(
            url,
            tmp_path_factory.mktemp("fleet"),
            [UsersLoad(users=2)],
            StopConfig(max_requests=REQUESTS, drain_timeout_s=10),
            output_tokens=6,
            backend=BackendConfig(name="vllm", replica_urls=(url,), metrics_interval_s=0.2),
        )
        result = run(cfg, quiet())
    finally:
        stop(proc, grace_s=10)
    return name, result


def test_each_record_names_the_replica_from_its_header(fleet_of_one):
    name, result = fleet_of_one
    records = records_of(result.run_dir)
    assert len(records) == REQUESTS
    assert all(r["replica"] == name and r["replica_from"] == "header" for r in records)


def test_the_replica_is_scraped_beside_the_router(fleet_of_one):
    name, result = fleet_of_one
    scrapes = SamplesFile(result.run_dir / "samples.jsonl").scrapes()
    assert scrapes and all(s["replicas"][name]["ok"] for s in scrapes)
    assert 'vllm:request_success_total{model_name="mock-model"}' in scrapes[-1]["replicas"][name]["raw"]


def test_the_points_fleet_figures_equal_the_script(fleet_of_one):
    name, result = fleet_of_one
    point = result.results["points"][0]
    fleet = point["fleet"]
    assert [r["replica"] for r in fleet["replicas"]] == [name]
    (replica,) = fleet["replicas"]
    window = point["requests_in_window"]["ok"]
    assert replica["requests"]["requests"] == fleet["attributed"] == window and fleet["unattributed"] == 0
    assert fleet["attributed_from"] == "header" and fleet["imbalance_over"] == "requests"
    assert fleet["imbalance_max_over_mean"] == 1.0 and fleet["imbalance_cv"] == 0.0
    assert replica["requests"]["ttft_s"]["p50"] >= 0.020  # the scripted TTFT (a timer never fires early)
    # its own counters over the window: the replies it finished and their tokens (6 each)
    assert replica["server"]["requests_finished"] == point["server"]["requests_finished"]
    assert replica["server"]["generated_tokens"] == 6 * replica["server"]["requests_finished"]
    assert replica["routed_requests"] is None  # no router counted them


def test_the_report_has_a_row_per_replica(fleet_of_one, tmp_path):
    from tokenbench.report import write_report

    name, result = fleet_of_one
    md = write_report([result.run_dir], tmp_path / "report").markdown.read_text()
    section = md[md.index("## Fleet: by replica") :]
    header, _, row = [line for line in section.splitlines() if line.startswith("|")][:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")], strict=True))
    assert cells["replica"] == name and cells["requests"] == str(REQUESTS)
    assert cells["imbalance max/mean"] == "1.00 (requests)"


def test_without_a_header_the_replica_comes_from_its_spans_resource(start_mock, tmp_path):
    """A replica exporting its spans with service.instance.id (the mock: its --served-by), read
    with a --replica-header it does not send: the records name none, the span join names it."""
    from tokenbench.config import DatasetConfig, RunConfig, TargetConfig

    port = free_port()
    url = start_mock(otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces", served_by="replica-a")
    cfg = RunConfig(
        target=TargetConfig(url=url, replica_header="x-not-sent"),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=6, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=4, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
        server_traces=True,
        server_traces_port=port,
    )
    result = run(cfg, quiet())
    assert all(r["replica"] is None for r in records_of(result.run_dir))
    fleet = result.results["points"][0]["fleet"]
    assert fleet["attributed_from"] == "span" and [r["replica"] for r in fleet["replicas"]] == ["replica-a"]
    assert fleet["attributed"] == result.results["points"][0]["requests_in_window"]["ok"]


def test_the_command_line_names_an_attached_fleets_replicas(fleet_of_one, tmp_path):
    """--replica-url (a repeated flag) reaches the run: its replica scraped, its point a fleet's."""
    from typer.testing import CliRunner

    from tokenbench.cli import app

    name, _ = fleet_of_one  # its mock is stopped: start another that names itself
    port = free_port()
    proc = subprocess.Popen(
        mock_command(port, served_by=f"127.0.0.1:{port}"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 20.0, proc)
        args = ["run", "--url", url, "--backend", "vllm", "--replica-url", url, "--users", "1"]
        args += ["--max-requests", "3", "--output-tokens", "4", "--out", str(tmp_path / "run"), "--no-live"]
        result = CliRunner().invoke(app, args)
    finally:
        stop(proc, grace_s=10)
    assert result.exit_code == 0, result.output
    import json

    point = json.loads((tmp_path / "run" / "results.json").read_text())["points"][0]
    (replica,) = point["fleet"]["replicas"]
    assert replica["replica"] == f"127.0.0.1:{port}" and replica["server"]["requests_finished"] == 3
