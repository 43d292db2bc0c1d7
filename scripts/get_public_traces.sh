#!/bin/sh
# The public traces benchmarks/public_traces.py replays, copied into .cache/traces/ (git-ignored)
# from local git mirrors of their repositories; nothing is downloaded. Each copy's sha256 is
# checked against the one recorded here (the files as the benchmark's baseline read them); a
# mismatch removes the copy and fails.
#
#   scripts/get_public_traces.sh MOONCAKE_GIT_DIR AZURE_GIT_DIR [OUT_DIR]
#   scripts/get_public_traces.sh /work/.mirror/kvcache-ai+Mooncake/repo /work/.mirror/Azure+AzurePublicDataset/repo
#
# A git dir is a bare clone or a checkout's .git; "-" skips that repository. Where the files come
# from upstream:
#   kvcache-ai/Mooncake (https://github.com/kvcache-ai/Mooncake), Apache-2.0 (LICENSE-APACHE):
#     FAST25-release/traces/conversation_trace.jsonl  12,031 rows
#     FAST25-release/traces/synthetic_trace.jsonl      3,993 rows
#     (both last changed in 3cca71daccf2a7afb8fe3f0295358f70e3a69fdb)
#   Azure/AzurePublicDataset (https://github.com/Azure/AzurePublicDataset), CC-BY 4.0 (LICENSE):
#     data/AzureLLMInferenceTrace_conv.csv            19,366 rows
#     data/AzureLLMInferenceTrace_code.csv             8,819 rows
#     (both last changed in 790921015d50dd6aae7f7e47f39ba0e235ad6b08)
# Without mirrors: clone those repositories (git clone --depth 1 URL) and pass their .git dirs.
set -eu

if [ $# -lt 2 ]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
MOONCAKE=$1
AZURE=$2
OUT=${3:-.cache/traces}
mkdir -p "$OUT"

# copy GIT_DIR PATH NAME SHA256: the file at HEAD of the repository, checked.
copy() {
    git --git-dir "$1" show "HEAD:$2" >"$OUT/$3.part" || { rm -f "$OUT/$3.part"; exit 1; }
    got=$(sha256sum "$OUT/$3.part" | cut -d' ' -f1)
    if [ "$got" != "$4" ]; then
        rm -f "$OUT/$3.part"
        echo "get_public_traces: $1 $2: sha256 $got, expected $4 (a different version of the file?)" >&2
        exit 1
    fi
    mv "$OUT/$3.part" "$OUT/$3"
    echo "$OUT/$3  <- $2 ($(git --git-dir "$1" log -1 --format=%h -- "$2"), sha256 $got)"
}

if [ "$MOONCAKE" != "-" ]; then
    copy "$MOONCAKE" FAST25-release/traces/conversation_trace.jsonl mooncake_conversation_trace.jsonl \
        b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df
    copy "$MOONCAKE" FAST25-release/traces/synthetic_trace.jsonl mooncake_synthetic_trace.jsonl \
        bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131
fi
if [ "$AZURE" != "-" ]; then
    copy "$AZURE" data/AzureLLMInferenceTrace_conv.csv AzureLLMInferenceTrace_conv.csv \
        2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8
    copy "$AZURE" data/AzureLLMInferenceTrace_code.csv AzureLLMInferenceTrace_code.csv \
        54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6
fi
