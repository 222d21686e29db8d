#!/bin/sh
# Make sure Debian's chromium is installed for the browser test (tests/test_browser.py).
#
# Idempotent: does nothing when /usr/bin/chromium (or $CHROMIUM) exists. Installs the distribution's
# package with apt-get when run as root; otherwise prints how to install it and exits 1.
# Playwright drives this binary (executable_path); it never downloads a browser of its own.
set -eu
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM" ]; then
    echo "chromium: $CHROMIUM is installed"
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "chromium is missing ($CHROMIUM) and this is not root, so it cannot be installed here." >&2
    echo "Install Debian's package, then run the tests again:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y chromium" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium is missing ($CHROMIUM) and apt-get is not available: install chromium with this" >&2
    echo "system's package manager, or point CHROMIUM=/path/to/chromium at an installed one." >&2
    exit 1
fi
echo "chromium: installing Debian's package (about 20 s, ~480 MB on disk)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
test -x "$CHROMIUM"
echo "chromium: $("$CHROMIUM" --version 2>/dev/null || echo installed at "$CHROMIUM")"
