"""Command line: flags -> config, then one call. Nothing else lives here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from .config import (
    BackendConfig,
    DatasetConfig,
    EngineKnobs,
    RateLoad,
    RunConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
    parse_slo,
)
from .vllm_flags import RunCommand

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="Benchmark LLM inference servers: realistic load, every streamed chunk timed.",
)
err = Console(stderr=True, soft_wrap=True)

# Settings fields as the flags that set them, so validation errors name the flag to fix.
_FLAGS = {
    "DatasetConfig.name": "--dataset",
    "DatasetConfig.input_tokens": "--input-tokens",
    "DatasetConfig.output_tokens": "--output-tokens",
    "DatasetConfig.num_prompts": "--num-prompts",
    "UsersLoad.users": "--users",
    "UsersLoad.ramp_up_s": "--ramp-up",
    "UsersLoad.think_time_s": "--think-time",
    "RateLoad.rate_per_s": "--rate",
    "RateLoad.arrival": "--arrival",
    "RateLoad.burstiness": "--burstiness",
    "RateLoad.max_concurrency": "--max-concurrency",
    "StopConfig.duration_s": "--duration",
    "StopConfig.max_requests": "--max-requests",
    "StopConfig.warmup_s": "--warmup",
    "TargetConfig.url": "--url",
    "TargetConfig.api": "--api",
    "RunConfig.window_s": "--window",
    "EngineKnobs.max_num_seqs": "--max-num-seqs",
    "EngineKnobs.kv_memory": "--kv-memory",
    "EngineKnobs.max_model_len": "--max-model-len",
    "EngineKnobs.tensor_parallel": "--tensor-parallel",
    "BackendConfig.port": "--engine-port",
    "BackendConfig.metrics_interval_s": "--metrics-interval",
    "BackendConfig.ready_timeout_s": "--ready-timeout",
}

# The common engine knobs, shared by `run` and `backends show` (backends/*.py map them to flags).
MaxNumSeqs = Annotated[
    int | None, typer.Option(help="Engine: max concurrent sequences (batch size).", rich_help_panel="Engine")
]
KVMemory = Annotated[
    float | None,
    typer.Option(
        help="Engine: fraction (0..1] of accelerator memory for weights + KV cache.", rich_help_panel="Engine"
    ),
]
MaxModelLen = Annotated[
    int | None, typer.Option(help="Engine: max model length (prompt + output tokens).", rich_help_panel="Engine")
]
PrefixCaching = Annotated[
    bool | None,
    typer.Option(
        "--prefix-caching/--no-prefix-caching",
        help="Engine: prefix caching on/off (default: the engine's).",
        rich_help_panel="Engine",
    ),
]
Quantization = Annotated[
    str | None, typer.Option(help="Engine: quantization method, in the engine's own words.", rich_help_panel="Engine")
]
TensorParallel = Annotated[int | None, typer.Option(help="Engine: tensor-parallel size.", rich_help_panel="Engine")]
EngineArg = Annotated[
    list[str] | None,
    typer.Option(
        help="Engine: a native flag passed through verbatim (repeat; use --engine-arg=--flag).",
        rich_help_panel="Engine",
    ),
]
EngineEnv = Annotated[
    list[str] | None,
    typer.Option(help="Engine: KEY=VALUE set in the engine's environment (repeat).", rich_help_panel="Engine"),
]
EngineBin = Annotated[
    str | None,
    typer.Option(
        help="Engine: the executable to run instead of the profile's command (e.g. a venv's bin/vllm).",
        rich_help_panel="Engine",
    ),
]

# The embedded default scenario (about a minute): a small ramp of chat users.
DEFAULT_USERS = 4
DEFAULT_RAMP_S = 10.0
DEFAULT_DURATION_S = 50.0
DEFAULT_INPUT_TOKENS = 64
DEFAULT_OUTPUT_TOKENS = 64


class UsageError(Exception):
    """Bad input: the message names what to change."""


def _numbers(text: str | None, flag: str, cast=float) -> list:
    if text is None:
        return []
    try:
        values = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{flag} is empty")
    return values


def _fail(message: str, code: int) -> None:
    from .redact import mask_text

    err.print(f"[bold red]error:[/] {mask_text(message)}")
    raise typer.Exit(code)


def _headers(items: list[str] | None) -> dict[str, str]:
    headers = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header takes 'Name: value', got {item.split(':')[0]!r}...")
        headers[name.strip()] = value.strip()
    return headers


def _json_body(text: str | None) -> dict:
    from .vllm_flags import FlagError, _json_object

    try:
        return _json_object(text) if text is not None else {}
    except FlagError as exc:
        raise UsageError(str(exc)) from None


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        field = ".".join(str(x) for x in e["loc"])
        flag = _FLAGS.get(f"{exc.title}.{field}", field or exc.title)
        parts.append(f"{flag}: {e['msg'].removeprefix('Value error, ')}")
    return "invalid settings: " + "; ".join(parts)


@app.command(cls=RunCommand)
def run(
    url: Annotated[
        str | None,
        typer.Option(help="Server base URL, e.g. http://127.0.0.1:8000. Omit to start the embedded llama.cpp backend."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name to request (default: the first of /v1/models). Without --url: a .gguf path for the embedded server."
        ),
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(
            help="chat, completions (OpenAI), or native: tgi, triton, ollama. Default: the backend's first API, else chat."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            help="Backend profile (tokenbench backends). With --model and no --url: launch it, benchmark, stop it. With --url: use its metric names.",
            rich_help_panel="Engine",
        ),
    ] = None,
    max_num_seqs: MaxNumSeqs = None,
    kv_memory: KVMemory = None,
    max_model_len: MaxModelLen = None,
    prefix_caching: PrefixCaching = None,
    quantization: Quantization = None,
    tensor_parallel: TensorParallel = None,
    engine_arg: EngineArg = None,
    engine_env: EngineEnv = None,
    engine_bin: EngineBin = None,
    served_model_name: Annotated[
        str | None,
        typer.Option(help="Engine: the model name requests use (default from --model).", rich_help_panel="Engine"),
    ] = None,
    engine_port: Annotated[
        int | None,
        typer.Option(
            help="Engine: port on 127.0.0.1 for the launched server (default: a free one). A port that already answers is an error naming its holder.",
            rich_help_panel="Engine",
        ),
    ] = None,
    ready_timeout: Annotated[
        float,
        typer.Option(
            help="Engine: seconds to wait for it to be ready (includes conversion/compilation).",
            rich_help_panel="Engine",
        ),
    ] = 900.0,
    metrics_interval: Annotated[
        float, typer.Option(help="Seconds between /metrics scrapes.", rich_help_panel="Engine")
    ] = 1.0,
    metrics_url: Annotated[
        str | None,
        typer.Option(
            help="Scrape this URL instead of the server URL + the profile's metrics path.", rich_help_panel="Engine"
        ),
    ] = None,
    users: Annotated[
        str | None, typer.Option(help="Closed loop: concurrent users, a list runs one point each: 10,50,100.")
    ] = None,
    rate: Annotated[
        str | None, typer.Option(help="Open loop: requests/s, a list runs one point each: 1,2,4,8.")
    ] = None,
    ramp_up: Annotated[float, typer.Option(help="Seconds over which users are spawned evenly.")] = 0.0,
    think_time: Annotated[
        float, typer.Option(help="Seconds a user waits after a reply before its next request.")
    ] = 0.0,
    arrival: Annotated[
        str | None, typer.Option(help="Open-loop arrivals: constant, poisson (default) or gamma.")
    ] = None,
    burstiness: Annotated[
        float | None,
        typer.Option(
            help="Gamma shape (1 = poisson, <1 burstier); other than 1 without --arrival: gamma, as in vllm bench serve."
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Open loop: at most this many in flight; the wait is recorded as queue delay.")
    ] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds of load per point.")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Stop a point after this many requests.")] = None,
    warmup: Annotated[float, typer.Option(help="Seconds after ramp-up excluded from metrics.")] = 0.0,
    drain_timeout: Annotated[
        float, typer.Option(help="Seconds in-flight requests may finish after the load stops.")
    ] = 60.0,
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrivals.")] = 0,
    dataset: Annotated[str, typer.Option(help="synthetic, sharegpt, dolly or jsonl.")] = "synthetic",
    dataset_path: Annotated[
        Path | None, typer.Option(help="Dataset file (sharegpt JSON, dolly JSONL, your JSONL).")
    ] = None,
    input_tokens: Annotated[int | None, typer.Option(help="Synthetic prompt length in tokens.")] = None,
    output_tokens: Annotated[
        int | None, typer.Option(help="max_tokens per request (default: dataset's reply length; synthetic 128).")
    ] = None,
    num_prompts: Annotated[
        int | None,
        typer.Option(
            help="Distinct prompts to load (default 1000), cycled until --duration/--max-requests; with neither, each is sent once (as vllm bench serve)."
        ),
    ] = None,
    min_prompt_tokens: Annotated[int | None, typer.Option(help="Keep prompts with at least this many tokens.")] = None,
    max_prompt_tokens: Annotated[int | None, typer.Option(help="Keep prompts with at most this many tokens.")] = None,
    system_prompt: Annotated[str | None, typer.Option(help="System prompt TEXT or @FILE.")] = None,
    unique_prefix: Annotated[
        bool, typer.Option(help="Prefix every prompt uniquely to defeat prefix caching across requests and runs.")
    ] = False,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="HF tokenizer.json (or folder) for exact lengths; default: the server's /tokenize."),
    ] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Ask the server to ignore EOS (fixed output lengths).")] = False,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
    extra_body: Annotated[
        str | None,
        typer.Option(
            help="JSON object merged into every request body (sampling parameters, e.g. '{\"temperature\": 0}')."
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            help="'Name: value' sent with every request (repeat); values are masked in every file tokenbench writes."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds a whole request may take.")] = 600.0,
    read_timeout: Annotated[float, typer.Option(help="Seconds of silence allowed within a stream.")] = 120.0,
    slo: Annotated[str | None, typer.Option(help="Goodput objectives, e.g. ttft=500ms,tpot=50ms.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<timestamp>).")] = None,
    window: Annotated[float, typer.Option(help="Time-series window in seconds.")] = 5.0,
    live: Annotated[bool, typer.Option(help="Show the live view.")] = True,
    keep_text: Annotated[bool, typer.Option(help="Store generated text in records.jsonl.")] = False,
) -> None:
    """Benchmark a server (or, with no --url, the embedded llama.cpp backend).

    Ctrl-C or SIGTERM stops the run, keeps every record and exits with 130 or 143; a second
    signal exits at once (`tokenbench recompute DIR` then derives results.json)."""
    from .procs import Interrupts

    Interrupts.install()
    try:
        config = _run_config(**locals())
    except UsageError as exc:
        _fail(str(exc), 2)
    except ValidationError as exc:
        _fail(_validation_message(exc), 2)
    from .backends import BackendError
    from .clients.stream import TargetUnreachable
    from .runner import run as run_benchmark

    try:
        result = run_benchmark(config, err)
    except (TargetUnreachable, BackendError) as exc:
        _fail(str(exc), 3)
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        _fail(str(exc), 2)
    except KeyboardInterrupt:  # before or between points: children are stopped by then
        err.print("[yellow]interrupted before the load started or finished; what was measured is on disk[/]")
        raise typer.Exit(Interrupts.exit_code()) from None
    err.print(f"results: {result.run_dir}/results.json  records: {result.run_dir}/records.jsonl")
    if result.interrupted:
        err.print("[yellow]interrupted: in-flight requests were recorded as cancelled[/]")
        raise typer.Exit(Interrupts.exit_code())


def _run_config(**a) -> RunConfig:
    users, rates = _numbers(a["users"], "--users", int), _numbers(a["rate"], "--rate")
    if users and rates:
        raise UsageError("use --users (closed loop) or --rate (open loop), not both")
    duration, max_requests = a["duration"], a["max_requests"]
    if a["num_prompts"] is not None and duration is None and max_requests is None:
        max_requests = a["num_prompts"]  # vllm bench serve's meaning: N prompts, each sent once
    default_scenario = not users and not rates
    if default_scenario:
        users, a["ramp_up"] = [DEFAULT_USERS], a["ramp_up"] or DEFAULT_RAMP_S
        if duration is None and max_requests is None:
            duration = DEFAULT_DURATION_S
    loads = (
        [UsersLoad(users=u, ramp_up_s=a["ramp_up"], think_time_s=a["think_time"]) for u in users]
        if users
        else [RateLoad(rate_per_s=r, max_concurrency=a["max_concurrency"], **_arrival(a)) for r in rates]
    )
    for load in loads:
        if isinstance(load, UsersLoad) and duration is not None and load.ramp_up_s + a["warmup"] >= duration:
            raise UsageError(
                f"--duration {duration:g} must be longer than --ramp-up + --warmup "
                f"({load.ramp_up_s + a['warmup']:g}s), or nothing is measured"
            )
    try:
        slo = parse_slo(a["slo"]) if a["slo"] else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    small = default_scenario and a["url"] is None and a["backend"] is None
    backend = _backend_config(a)
    return RunConfig(
        backend=backend,
        target=TargetConfig(
            url=a["url"],
            model=None if (backend and not a["url"]) else a["model"],
            api=a["api"],
            api_key_env=a["api_key_env"],
            request_timeout_s=a["timeout"],
            read_timeout_s=a["read_timeout"],
            ignore_eos=a["ignore_eos"],
            headers=_headers(a["header"]),
            extra_body=_json_body(a["extra_body"]),
        ),
        loads=loads,
        stop=StopConfig(
            duration_s=duration, max_requests=max_requests, warmup_s=a["warmup"], drain_timeout_s=a["drain_timeout"]
        ),
        dataset=DatasetConfig(
            name=a["dataset"],
            path=a["dataset_path"],
            input_tokens=a["input_tokens"] or (DEFAULT_INPUT_TOKENS if small else 128),
            output_tokens=a["output_tokens"] or (DEFAULT_OUTPUT_TOKENS if small else None),
            **({"num_prompts": a["num_prompts"]} if a["num_prompts"] is not None else {}),
            min_prompt_tokens=a["min_prompt_tokens"],
            max_prompt_tokens=a["max_prompt_tokens"],
            system_prompt=a["system_prompt"],
            unique_prefix=a["unique_prefix"],
            tokenizer=a["tokenizer"],
        ),
        **({"slo": slo} if slo else {}),
        seed=a["seed"],
        window_s=a["window"],
        out_dir=a["out"],
        live=a["live"],
        keep_text=a["keep_text"],
    )


def _arrival(a: dict) -> dict:
    """--arrival and --burstiness: a burstiness other than 1 means gamma arrivals (vllm bench
    serve's meaning) unless --arrival says otherwise, which is then an error."""
    arrival, burstiness = a["arrival"], a["burstiness"]
    if burstiness is not None and burstiness != 1.0:
        if arrival is None:
            arrival = "gamma"
        elif arrival != "gamma":
            raise UsageError(
                f"--burstiness {burstiness:g} shapes gamma arrivals; with --arrival {arrival} "
                f"it would be ignored: drop one, or use --arrival gamma"
            )
    return {k: v for k, v in (("arrival", arrival), ("burstiness", burstiness)) if v is not None}


def _knobs(a: dict) -> EngineKnobs:
    env = {}
    for item in a.get("engine_env") or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--engine-env takes KEY=VALUE, got {item!r}")
        env[key] = value
    return EngineKnobs(
        max_num_seqs=a["max_num_seqs"],
        kv_memory=a["kv_memory"],
        max_model_len=a["max_model_len"],
        prefix_caching=a["prefix_caching"],
        quantization=a["quantization"],
        tensor_parallel=a["tensor_parallel"],
        engine_args=tuple(a.get("engine_arg") or ()),
        engine_env=env,
    )


def _backend_config(a: dict) -> BackendConfig | None:
    knobs = _knobs(a)
    if a["backend"] is None:
        if knobs != EngineKnobs() or a["engine_bin"] or a["engine_port"]:
            if a["url"] is not None:
                raise UsageError(
                    "engine knobs (--max-num-seqs, --engine-arg, ...) need a launched "
                    "backend: drop --url and pass --backend NAME --model M"
                )
            from .backends import EMBEDDED

            # the embedded default backend takes the knobs too
            config = BackendConfig(
                name=EMBEDDED,
                model=a["model"],
                knobs=knobs,
                executable=a["engine_bin"],
                metrics_interval_s=a["metrics_interval"],
                port=a["engine_port"],
            )
            _check_backend(config, launch=False)
            return config
        if a["metrics_url"] is not None:
            return BackendConfig(metrics_url=a["metrics_url"], metrics_interval_s=a["metrics_interval"])
        return None
    if a["url"] is not None and knobs != EngineKnobs():
        raise UsageError("engine knobs are for a server tokenbench launches; with --url they would be ignored")
    config = BackendConfig(
        name=a["backend"],
        model=a["model"],
        served_model_name=a["served_model_name"],
        knobs=knobs,
        executable=a["engine_bin"],
        ready_timeout_s=a["ready_timeout"],
        port=a["engine_port"],
        metrics_interval_s=a["metrics_interval"],
        metrics_url=a["metrics_url"],
    )
    _check_backend(config, launch=a["url"] is None)
    return config


def _check_backend(config: BackendConfig, launch: bool) -> None:
    """Bad input before anything starts: an unknown profile, a knob it cannot map, an API it
    does not serve."""
    from .backends import BackendError, get_profile
    from .backends.server import launch_spec

    try:
        profile = get_profile(config.name or "")
        if launch:
            profile.local(launch_spec(profile, config))
    except BackendError as exc:
        raise UsageError(str(exc)) from None


backends_app = typer.Typer(
    help="Backend profiles: list them, or show the exact launch command.", invoke_without_command=True
)
app.add_typer(backends_app, name="backends")


@backends_app.callback()
def backends_list(ctx: typer.Context) -> None:
    """List the backend profiles."""
    if ctx.invoked_subcommand is not None:
        return
    from .backends import PROFILES
    from .report.console import backends_table

    Console().print(backends_table(PROFILES.values()))


@backends_app.command("show")
def backends_show(
    name: Annotated[str, typer.Argument(help="Profile name (tokenbench backends).")],
    model: Annotated[str, typer.Option(help="What the engine loads: hub id or local path.")] = "MODEL",
    port: Annotated[int | None, typer.Option(help="Port (default: the engine's usual one).")] = None,
    container: Annotated[bool, typer.Option(help="Show the container command instead of the local one.")] = False,
    served_model_name: Annotated[str | None, typer.Option(help="The model name requests use.")] = None,
    max_num_seqs: MaxNumSeqs = None,
    kv_memory: KVMemory = None,
    max_model_len: MaxModelLen = None,
    prefix_caching: PrefixCaching = None,
    quantization: Quantization = None,
    tensor_parallel: TensorParallel = None,
    engine_arg: EngineArg = None,
    engine_env: EngineEnv = None,
    engine_bin: EngineBin = None,
) -> None:
    """Print the exact launch command (an argument list) and what the profile knows."""
    import shlex

    from .backends import BackendError, get_profile
    from .backends.server import launch_spec
    from .report.console import profile_panel

    try:
        profile = get_profile(name)
        config = BackendConfig(
            name=name,
            model=model,
            served_model_name=served_model_name,
            knobs=_knobs(locals()),
            executable=engine_bin,
            port=port,
        )
        spec = launch_spec(profile, config)
        launch = (profile.container if container else profile.local)(spec)
    except UsageError as exc:
        _fail(str(exc), 2)
    except ValidationError as exc:
        _fail(_validation_message(exc), 2)
    except BackendError as exc:
        _fail(str(exc), 2)
    from .redact import mask, mask_argv

    # credentials masked here too: the command is for reading and copying, not for leaking
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in mask(dict(launch.env)).items())
    typer.echo((env + " " if env else "") + shlex.join(mask_argv(launch.argv)))
    err.print(profile_panel(profile, spec))


experiment_app = typer.Typer(
    help="Experiments: backends x knobs x loads x trials from a YAML file or a preset.", no_args_is_help=True
)
app.add_typer(experiment_app, name="experiment")


@experiment_app.command("run")
def experiment_run(
    file: Annotated[Path | None, typer.Argument(help="Experiment YAML file.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="A built-in experiment instead of a file (tokenbench experiment presets).")
    ] = None,
    scale: Annotated[
        str, typer.Option(help="Preset size: small (minutes on a CPU) or full (the study, for GPUs).")
    ] = "small",
    out: Annotated[
        Path | None, typer.Option(help="Experiment directory (default runs/<name>); re-running resumes it.")
    ] = None,
) -> None:
    """Run an experiment: each server configuration launched once, one run directory per cell,
    trials aggregated; finished cells are skipped when resumed."""
    from .procs import Interrupts

    Interrupts.install()
    from .experiments.presets import preset as load_preset
    from .experiments.runner import run_experiment
    from .experiments.spec import ExperimentError, load_spec

    try:
        if (file is None) == (preset is None):
            raise ExperimentError("give an experiment FILE or --preset NAME (one of them)")
        if scale not in ("small", "full"):
            raise ExperimentError(f"--scale must be small or full, got {scale!r}")
        spec = load_spec(file) if file is not None else load_preset(preset, scale)  # type: ignore[arg-type]
        result = run_experiment(spec, out or Path("runs") / spec.name, err)
    except ExperimentError as exc:
        _fail(str(exc), 2)
    err.print(f"experiment: {result.dir}/experiment.json   report: tokenbench report {result.dir}")
    if result.interrupted:
        err.print("[yellow]interrupted: run the same command again to resume[/]")
        raise typer.Exit(Interrupts.exit_code())
    failed = [c for c in result.state["cells"].values() if c["status"] != "ok"]
    if failed:
        raise typer.Exit(1)


@experiment_app.command("presets")
def experiment_presets(
    show: Annotated[str | None, typer.Option(help="Print this preset as YAML (copy it to start your own).")] = None,
    scale: Annotated[str, typer.Option(help="small or full.")] = "small",
) -> None:
    """List the built-in experiments, or print one as YAML."""
    import yaml

    from .experiments.presets import PRESETS, preset_data
    from .experiments.spec import ExperimentError

    if show is None:
        from .experiments import presets as module

        typer.echo((module.__doc__ or "").strip())
        typer.echo("\npresets: " + ", ".join(PRESETS))
        return
    try:
        typer.echo(yaml.safe_dump(preset_data(show, scale), sort_keys=False))  # type: ignore[arg-type]
    except ExperimentError as exc:
        _fail(str(exc), 2)


def _require_result_dirs(dirs: list[Path]) -> None:
    from .report.load import is_experiment_dir, is_run_dir

    for d in dirs:
        if not (is_run_dir(d) or is_experiment_dir(d)):
            _fail(f"{d}: not a run directory (results.json) or an experiment directory (experiment.json)", 2)


@app.command()
def report(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write report.html, report.md and charts/ (default: the first directory)."),
    ] = None,
) -> None:
    """Write a self-contained HTML report (plus PNG charts and a Markdown summary)."""
    from .report.html import write_report

    _require_result_dirs(dirs)
    files = write_report(dirs, out or dirs[0])
    err.print(
        f"report: {files.html}  markdown: {files.markdown}  charts: {len(files.charts)} PNG in {files.html.parent / 'charts'}"
    )


@app.command()
def recompute(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
) -> None:
    """Derive results.json again from a run's records.jsonl, samples.jsonl and config.json (after
    a crash, or after an upgrade that fixed a metric), with this version's definitions; for an
    experiment, every cell and then the aggregates. The previous file is kept as *.previous.json."""
    from .derive import RecomputeError, recompute_experiment, recompute_run
    from .report.console import summary_table
    from .report.load import is_experiment_dir

    for d in dirs:
        try:
            if is_experiment_dir(d):
                state = recompute_experiment(d)
                err.print(f"experiment: {d}/experiment.json ({len(state['aggregates'])} aggregate rows)")
            else:
                results = recompute_run(d)
                err.print(summary_table(results["points"]))
                err.print(
                    f"results: {d}/results.json (computed by tokenbench {results['computed_by']['version']}"
                    f"{', interrupted run' if results['interrupted'] else ''})"
                )
        except (RecomputeError, OSError, ValueError) as exc:
            _fail(f"{d}: {exc}", 2)


@app.command()
def export(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
    format: Annotated[str, typer.Option(help="parquet or csv.")] = "parquet",
    out: Annotated[Path | None, typer.Option(help="Where to write (default: each directory itself).")] = None,
) -> None:
    """Write records, points and time series as tables (records.parquet, points.parquet,
    timeseries.parquet, or .csv): one row per request / point / window, the run's facts as columns."""
    from .export import ExportError
    from .export import export as export_dir

    for d in dirs:
        try:
            files = export_dir(d, format, out / d.name if out is not None and len(dirs) > 1 else out)  # type: ignore[arg-type]
        except (ExportError, OSError, ValueError) as exc:
            _fail(f"{d}: {exc}", 2)
        err.print("  ".join(f"{name}: {path}" for name, path in files.items()))


@app.command()
def compare(
    dirs: Annotated[list[Path], typer.Argument(help="Two or more run or experiment directories.")],
    out: Annotated[Path | None, typer.Option(help="Also write the comparison as Markdown here.")] = None,
) -> None:
    """Side by side with deltas, and whether each difference is significant across trials."""
    from .report import compare as cmp

    if len(dirs) < 2:
        _fail("compare needs at least two directories", 2)
    _require_result_dirs(dirs)
    result = cmp.compare(dirs)
    Console().print(cmp.compare_table(result))
    if out is not None:
        out.write_text(cmp.compare_markdown(result))
        err.print(f"comparison: {out}")


@app.command()
def mock(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 9000,
    ttft_ms: Annotated[float, typer.Option(help="Time to first content chunk.")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="Gap between content chunks.")] = 10.0,
    output_tokens: Annotated[int, typer.Option(help="Chunks per reply when a request sets no max_tokens.")] = 128,
    tokens_per_chunk: Annotated[int, typer.Option(help="Tokens each chunk stands for.")] = 1,
    fault: Annotated[
        str,
        typer.Option(
            help="none, http_500, http_429, http_400, disconnect, malformed, error_event, no_content, stall, abort, no_end."
        ),
    ] = "none",
    fault_every: Annotated[int, typer.Option(help="Apply the fault to every N-th request.")] = 1,
    fault_after_chunks: Annotated[int, typer.Option(help="Mid-stream faults happen after this many chunks.")] = 3,
    kv_slots: Annotated[
        int,
        typer.Option(
            help="Count a vllm:num_preemptions_total for each request arriving above this many in flight (0: never)."
        ),
    ] = 0,
    max_streams: Annotated[
        int,
        typer.Option(help="Capacity: at most this many requests generate at once; the rest wait FIFO (0: no limit)."),
    ] = 0,
) -> None:
    """Serve a scripted OpenAI-compatible streaming endpoint on 127.0.0.1."""
    from .mock import MockSettings, serve

    try:
        settings = MockSettings(
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            output_tokens=output_tokens,
            tokens_per_chunk=tokens_per_chunk,
            fault=fault,
            fault_every=fault_every,
            fault_after_chunks=fault_after_chunks,
            kv_slots=kv_slots,
            max_streams=max_streams,
        )
    except (TypeError, ValueError) as exc:
        _fail(str(exc), 2)
    from typing import get_args

    from .mock import Fault

    if fault not in get_args(Fault):
        _fail(f"--fault must be one of {', '.join(get_args(Fault))}", 2)
    err.print(f"mock server on http://127.0.0.1:{port} (TTFT {ttft_ms} ms, ITL {itl_ms} ms)")
    serve(settings, port=port)


@app.command()
def calibrate(
    users: Annotated[int, typer.Option(help="Concurrent streams.")] = 32,
    requests: Annotated[int | None, typer.Option(help="Requests in all (default 8 per user).")] = None,
    ttft_ms: Annotated[float, typer.Option()] = 50.0,
    itl_ms: Annotated[float, typer.Option()] = 10.0,
    output_tokens: Annotated[int, typer.Option()] = 128,
    pin: Annotated[bool, typer.Option(help="Pin the mock to one core and the client to another.")] = True,
) -> None:
    """Measure the client's own overhead floor at a load, against the mock server."""
    from .calibrate import CalibrationSpec, calibration_table
    from .calibrate import calibrate as run_calibration

    spec = CalibrationSpec(
        users=users,
        requests=requests or users * 8,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        output_tokens=output_tokens,
        pin_cores=pin,
    )
    result = run_calibration(spec)
    Console().print(calibration_table([result]))


def main() -> None:  # pragma: no cover
    app()
