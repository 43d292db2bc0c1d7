"""Child process that hosts llama.cpp's server through the xllamacpp wheel.

Run as ``python -m tokenbench.backends._xllamacpp_child --model F.gguf ...``. It prints one line
``LISTENING <url>`` on stdout once the server accepts connections, then serves until terminated.
A separate process keeps the server's threads off the load generator's interpreter and GIL.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx-size", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--alias", default=None)
    args = ap.parse_args()
    # Keep the real stdout only for the address line; everything else (llama.cpp prints to
    # stdout too) goes to stderr, i.e. the log file. A stdout pipe nobody reads fills up at 64 KB
    # and blocks the server mid-run.
    address_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = args.alias
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    server = xlc.Server(params)
    address_out.write(f"LISTENING {server.listening_address}\n")
    address_out.close()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del server
    sys.exit(0)


if __name__ == "__main__":
    main()
