"""How a settings field says which command-line option sets it (config/, capacity/plan.py, mock/settings.py): read by
cli/flags.py, which builds the commands' options from them and names the flag in an error. No
imports: every settings module can declare its flags with these."""

from __future__ import annotations

from dataclasses import dataclass

# The groups of a command's options in --help (cli/help.py): every flag names its group
# (``Flag.panel``); `tokenbench run --help` shows the first five, ``--help GROUP`` any other.
TARGET = "Target"
LOAD = "Load"
DATASET = "Dataset"
STOPPING = "Stopping"
OUTPUT = "Output"
RUN_FILE = "Run file and plan"  # `tokenbench run --config/--print-config/--dry-run` (cli/run.py)
REQUESTS = "Request kinds"
ENGINE = "Engine"
TELEMETRY = "Telemetry"
SCALE = "Scale-out"
TRACE = "Trace replay"
PREFIXES = "Shared prefixes"
SESSIONS = "Sessions"
PROGRAMS = "Agent programs"
COST = "Cost"
IMAGES = "Images"
SEARCH = "Capacity search"  # `tokenbench capacity --help` (capacity/plan.py: CapacitySettings)
VLLM = "vllm bench's spellings"  # the vllm-bench names `run` rewrites as its own (cli/vllm_flags.py)
# `tokenbench mock`'s (mock/settings.py: MockSettings)
REPLIES = "Replies"
FAULTS = "Faults"
SCHEDULING = "Scheduling"
SPANS = "Spans"
ENGINE_FIGURES = "Engine figures"

# Every group, in the order --help lists them, each with what its options are for.
GROUPS: dict[str, str] = {
    TARGET: "the server, its API and how requests reach it",
    LOAD: "how many requests and when: users, rates, stages",
    DATASET: "what the prompts are, and how long",
    STOPPING: "when a load point ends and what counts",
    OUTPUT: "the run directory, objectives, the live view",
    RUN_FILE: "the settings from a file, and the plan before the load",
    SEARCH: "the load search of tokenbench capacity",
    REQUESTS: "what each request asks for beyond its prompt",
    ENGINE: "launching a server and its knobs",
    TELEMETRY: "metrics, spans and replicas watched during the run",
    SCALE: "sending the load from several processes",
    TRACE: "replaying a trace file's schedule",
    PREFIXES: "synthetic prompts that share prefixes",
    SESSIONS: "multi-turn conversations",
    PROGRAMS: "agent sessions: graphs of calls",
    IMAGES: "synthetic images in chat requests",
    COST: "the price of the server's hardware",
    VLLM: "vllm bench serve's flags, rewritten as tokenbench's",
    REPLIES: "the mock's timing and what its replies hold",
    FAULTS: "failures the mock scripts",
    SCHEDULING: "the mock's capacity, queue, replicas and prefix cache",
    SPANS: "the OpenTelemetry spans the mock sends",
    ENGINE_FIGURES: "vLLM's per-request figures and speculative decoding, scripted",
}


@dataclass(frozen=True)
class Flag:
    """The command-line option that sets this field: its name, help and help panel. The option's
    value type comes from the field (bool: ``--x/--no-x``; a Literal: its choices shown in
    --help); a list, dict or model field takes text the command parses (``repeat``: the option
    may be given several times). ``default``: True appends ``[default: <the field's default>]``
    to the help, a string appends that text. ``aliases``: other names of the same option."""

    name: str
    help: str
    panel: str | None = None
    default: bool | str = False
    repeat: bool = False
    aliases: tuple[str, ...] = ()
    switch: bool = False  # a --x/--no-x option for a field that is not a bool (--multi-turn: sessions)
    auto: bool = False  # a duration option that also takes the word ``auto`` (--duration, --warmup)


@dataclass(frozen=True)
class SetBy:
    """This field is set from another field's flag (named in its errors)."""

    name: str
