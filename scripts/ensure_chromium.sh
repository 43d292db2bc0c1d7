#!/bin/sh
# Chromium for the report's headless-browser test (tests/report/test_report_browser.py), from
# Debian's packages. Playwright drives this binary; it never downloads a browser of its own.
# Idempotent: does nothing when /usr/bin/chromium is there.
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "ensure_chromium: not root and no sudo; install Debian's chromium package by hand" >&2
    exit 1
fi
# env, not export: sudo drops the caller's environment
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
test -x /usr/bin/chromium
