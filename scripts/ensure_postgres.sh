#!/bin/sh
# Make sure PostgreSQL server binaries (initdb, pg_ctl) exist for the journal tests.
#
# The tests start a throwaway server from /usr/lib/postgresql/*/bin (tests/support/postgres.py).
# No-op when LANGMEM_TIERS_TEST_PG_URL names an existing server or the binaries are installed;
# otherwise installs Debian's postgresql package (root, or sudo without a password). Idempotent.
# When nothing can be installed it says so and exits 0: the PostgreSQL tests then skip, with the reason.
set -eu

if [ -n "${LANGMEM_TIERS_TEST_PG_URL:-}" ]; then
    echo "ensure_postgres: using LANGMEM_TIERS_TEST_PG_URL"
    exit 0
fi

have_binaries() {
    for bindir in /usr/lib/postgresql/*/bin; do
        if [ -x "$bindir/initdb" ] && [ -x "$bindir/pg_ctl" ]; then
            return 0
        fi
    done
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1
}

if have_binaries; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_postgres: no initdb and no apt-get: install PostgreSQL server binaries or set" \
         "LANGMEM_TIERS_TEST_PG_URL; the PostgreSQL tests will be skipped" >&2
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "ensure_postgres: initdb is missing and this user cannot install packages:" \
         "run 'sudo apt-get install -y postgresql' or set LANGMEM_TIERS_TEST_PG_URL;" \
         "the PostgreSQL tests will be skipped" >&2
    exit 0
fi

echo "ensure_postgres: installing Debian's postgresql package"
# The package's own cluster is not needed: the tests run their own server in a temporary folder.
if ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql \
            >/dev/null; }; then
    echo "ensure_postgres: apt-get could not install postgresql; the PostgreSQL tests will be skipped" >&2
    exit 0
fi

if have_binaries; then
    echo "ensure_postgres: installed $(ls -d /usr/lib/postgresql/*/bin | tail -n 1)"
else
    echo "ensure_postgres: apt-get finished but initdb is still missing; the PostgreSQL tests will be skipped" >&2
fi
