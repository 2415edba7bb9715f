#!/bin/sh
# Make sure a headless Chromium from the system packages exists for the inspector's browser test.
#
# tests/test_inspector_browser.py drives /usr/bin/chromium with Playwright's Python package
# (executable_path=..., never `playwright install`: no browser is downloaded at run time).
# No-op when the binary is installed; otherwise installs Debian's chromium package (root, or sudo
# without a password). Idempotent. When nothing can be installed it says so and exits 0: the browser
# test then skips, with the reason.
set -eu

CHROMIUM="${LANGMEM_TIERS_CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: no $CHROMIUM and no apt-get: install Chromium or set LANGMEM_TIERS_CHROMIUM;" \
         "the inspector's browser test will be skipped" >&2
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "ensure_chromium: $CHROMIUM is missing and this user cannot install packages:" \
         "run 'sudo apt-get install -y chromium'; the inspector's browser test will be skipped" >&2
    exit 0
fi

echo "ensure_chromium: installing Debian's chromium package"
if ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
            fonts-dejavu-core >/dev/null; }; then
    echo "ensure_chromium: apt-get could not install chromium; the inspector's browser test will be skipped" >&2
    exit 0
fi

if [ -x "$CHROMIUM" ]; then
    echo "ensure_chromium: installed $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
else
    echo "ensure_chromium: apt-get finished but $CHROMIUM is still missing; the browser test will be skipped" >&2
fi
