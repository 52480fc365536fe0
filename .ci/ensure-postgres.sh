#!/usr/bin/env bash
# Makes sure the PostgreSQL server named by DATABASE_URL (default: the local
# server on 127.0.0.1:5432) is running and reachable, and that the database
# exists. On this project's Debian machines it starts a stopped local
# cluster; with --install (CI) it also installs PostgreSQL when missing.
# It says exactly what to do when it cannot fix things itself.
set -euo pipefail

install=false
[ "${1:-}" = "--install" ] && install=true

url="${DATABASE_URL:-postgres://127.0.0.1:5432/accord?sslmode=disable}"
# The database name and a maintenance URL on the same server.
dbname=$(printf '%s' "$url" | sed -E 's#^[a-z]+://[^/]*/([^?]*).*#\1#')
[ -n "$dbname" ] || dbname=accord
admin_url=$(printf '%s' "$url" | sed -E "s#^([a-z]+://[^/]*/)[^?]*#\1postgres#")

say() { echo "ensure-postgres: $*" >&2; }

local_server() { case "$url" in *://127.0.0.1*|*://localhost*|*:///*) return 0;; esac; return 1; }

if ! pg_isready -q -d "$admin_url" 2>/dev/null; then
  if ! local_server; then
    say "the PostgreSQL server in DATABASE_URL is not reachable: start it, or fix DATABASE_URL"
    exit 1
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    if $install && [ "$(id -u)" = 0 ]; then
      say "installing PostgreSQL from Debian's packages"
      # shellcheck source=apt.sh
      source "$(dirname "$0")/apt.sh"
      APT_WHO=ensure-postgres apt_install postgresql postgresql-client
      ver=$(ls /etc/postgresql | sort -V | tail -n1)
      # Local development: trust connections from this machine's loopback.
      hba=/etc/postgresql/$ver/main/pg_hba.conf
      sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
      # Where the package started the cluster already, it must read the
      # new line: reload it; otherwise start it.
      pg_ctlcluster --skip-systemctl-redirect "$ver" main reload 2>/dev/null ||
        pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
      su postgres -c "psql -qc \"DO \\\$\\\$ BEGIN CREATE ROLE \\\"$(id -un)\\\" SUPERUSER LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \\\$\\\$\"" >/dev/null
    else
      say "no PostgreSQL server found. Install one (Debian: sudo apt-get install postgresql), or set DATABASE_URL to a server you have, then run this again."
      exit 1
    fi
  else
    ver=$(ls /etc/postgresql | sort -V | tail -n1)
    say "starting the local PostgreSQL $ver cluster"
    if [ "$(id -u)" = 0 ]; then
      pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    else
      sudo pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    fi
  fi
  for _ in $(seq 1 30); do pg_isready -q -d "$admin_url" && break; sleep 1; done
  if ! pg_isready -q -d "$admin_url"; then
    say "PostgreSQL did not become ready; see /var/log/postgresql/ for why"
    exit 1
  fi
fi

if ! psql "$admin_url" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  say "PostgreSQL is running but refused the connection $(printf '%s' "$admin_url" | sed -E 's#//[^@/]*@#//***@#')."
  say "Give DATABASE_URL a user and password that may connect, for example postgres://accord:secret@127.0.0.1:5432/accord"
  exit 1
fi
exists=$(psql "$admin_url" -qAtc "SELECT 1 FROM pg_database WHERE datname = '$dbname'")
if [ "$exists" != 1 ]; then
  say "creating database $dbname"
  psql "$admin_url" -qc "CREATE DATABASE \"$dbname\"" >/dev/null
fi
