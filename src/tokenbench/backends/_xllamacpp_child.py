"""Child process that hosts llama.cpp's server through the xllamacpp wheel.

Run as ``python -m tokenbench.backends._xllamacpp_child -m F.gguf --port P ...``: it takes the
subset of ``llama-server``'s flags that the llama.cpp profile renders, so both launch modes share
one knob mapping (backends/llamacpp.py). Serves until SIGTERM. A separate process keeps the
server's threads off the load generator's interpreter and GIL.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

POOLING = ("none", "mean", "cls", "last", "rank")
# speculative decoding: llama-server's --spec-type names (common/arg.cpp), xllamacpp's
# common_speculative_type COMMON_SPECULATIVE_TYPE_<NAME> with dashes as underscores
SPEC_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod")


def _exit_now(*_: object) -> None:
    raise SystemExit(0)


def main() -> None:
    ap = argparse.ArgumentParser(prog="xllamacpp-server")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-np", "--parallel", type=int, default=4)
    ap.add_argument("-c", "--ctx-size", type=int, default=8192)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-a", "--alias", default=None)
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false")
    ap.add_argument("--cache-prompt", dest="cache_prompt", action="store_true")
    ap.add_argument("--slot-save-path", default=None, help="enables POST /slots/{id}?action=erase (and save)")
    ap.add_argument("--cache-ram", type=int, default=None, help="host-RAM prompt cache in MiB (0: off)")
    ap.add_argument("--api-key", action="append", default=[], help="require this bearer key (repeat)")
    # pooling APIs: llama-server's --embedding and --pooling (common/arg.cpp)
    ap.add_argument("--embedding", "--embeddings", action="store_true", help="serve /v1/embeddings")
    ap.add_argument("--pooling", choices=POOLING, default=None, help="how an input's tokens become one vector")
    # images: a multimodal projector GGUF (llama-server's --mmproj): image_url parts accepted
    ap.add_argument("--mmproj", default=None, help="multimodal projector GGUF (images)")
    # speculative decoding: llama-server's names (common/arg.cpp; backends/speculation.py renders them)
    ap.add_argument("--spec-type", type=_spec_types, default=None, help="comma-separated: " + ",".join(SPEC_TYPES))
    ap.add_argument("--spec-draft-model", "--model-draft", "-md", default=None, help="draft model GGUF")
    ap.add_argument("--spec-draft-n-max", type=int, default=None, help="tokens a draft model proposes per step")
    ap.add_argument("--spec-ngram-simple-size-n", type=int, default=None, help="ngram-simple: the n-gram looked up")
    ap.add_argument("--spec-ngram-simple-size-m", type=int, default=None, help="ngram-simple: the m-gram drafted")
    args = ap.parse_args()

    import xllamacpp as xlc  # type: ignore[import-untyped]  # the wheel ships no type hints

    params = xlc.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = args.alias
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cache_prompt = args.cache_prompt
    params.endpoint_metrics = args.metrics
    if args.slot_save_path is not None:
        params.slot_save_path = args.slot_save_path
    if args.cache_ram is not None:
        params.cache_ram_mib = args.cache_ram
    if args.api_key:
        params.api_keys = args.api_key
    if args.embedding:
        params.embedding = True
    if args.pooling is not None:
        params.pooling_type = getattr(xlc.llama_pooling_type, f"LLAMA_POOLING_TYPE_{args.pooling.upper()}")
    if args.mmproj is not None:
        params.mmproj.path = args.mmproj
    _speculation(xlc, params, args)
    server = xlc.Server(params)
    print(f"LISTENING {server.listening_address}", flush=True)
    # SIGTERM/SIGINT unwind the wait (a handler calling Event.set() could deadlock on the lock
    # the waiting main thread holds)
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    try:
        threading.Event().wait()
    finally:
        del server


def _spec_types(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in SPEC_TYPES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: write one or more of {', '.join(SPEC_TYPES)}")
    return names


def _speculation(xlc: Any, params: Any, args: argparse.Namespace) -> None:
    """The speculative decoding flags -> CommonParams.speculative (its draft model on the server's
    threads: llama-server copies them in its argument parsing, which this child does not run)."""
    names = (
        "spec_type",
        "spec_draft_model",
        "spec_draft_n_max",
        "spec_ngram_simple_size_n",
        "spec_ngram_simple_size_m",
    )
    if all(getattr(args, name) is None for name in names):
        return  # no speculation: CommonParams as it came
    spec = params.speculative
    if args.spec_type is not None:
        kind = xlc.common_speculative_type
        spec.types = [getattr(kind, "COMMON_SPECULATIVE_TYPE_" + t.upper().replace("-", "_")) for t in args.spec_type]
    if args.spec_draft_model is not None:
        spec.draft.mparams.path = args.spec_draft_model
        spec.draft.cpuparams.n_threads = args.threads
        spec.draft.cpuparams_batch.n_threads = args.threads
    if args.spec_draft_n_max is not None:
        spec.draft.n_max = args.spec_draft_n_max
    if args.spec_ngram_simple_size_n is not None:
        spec.ngram_simple.size_n = args.spec_ngram_simple_size_n
    if args.spec_ngram_simple_size_m is not None:
        spec.ngram_simple.size_m = args.spec_ngram_simple_size_m


if __name__ == "__main__":
    main()
