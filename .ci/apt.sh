#!/usr/bin/env bash
# apt_install PKG...: installs Debian packages, waiting (and saying so) while
# another package manager holds dpkg's or apt's lock, up to
# ACCORD_APT_LOCK_TIMEOUT seconds (default 600), then giving up with a
# message. Sourced by ensure-tools.sh, ensure-postgres.sh and run.

# The locks apt-get and dpkg take (ACCORD_APT_LOCKS overrides, for tests).
apt_locks() { echo "${ACCORD_APT_LOCKS:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock}"; }

# apt_lock_holders prints "PID (command)" for each process holding a lock.
apt_lock_holders() {
  local pids
  # shellcheck disable=SC2046
  pids=$(fuser $(apt_locks) 2>/dev/null | tr -s ' ' '\n' | grep -E '^[0-9]+$' | sort -u || true)
  for p in $pids; do
    echo "$p ($(cat "/proc/$p/comm" 2>/dev/null || echo '?'))"
  done
}

# apt_wait_for_lock [WHO]: returns once no process holds a lock, 1 after the
# timeout.
apt_wait_for_lock() {
  local who="${1:-apt}" timeout="${ACCORD_APT_LOCK_TIMEOUT:-600}" waited=0 holders
  while holders=$(apt_lock_holders) && [ -n "$holders" ]; do
    if [ "$waited" -ge "$timeout" ]; then
      echo "$who: gave up after ${timeout}s: the package manager is still busy ($(echo $holders)); run make run again when it is done (ACCORD_APT_LOCK_TIMEOUT sets the wait)" >&2
      return 1
    fi
    if [ $((waited % 15)) -eq 0 ]; then
      echo "$who: waiting for another package install to finish: $(echo $holders) holds the dpkg lock (waited ${waited}s of ${timeout}s)" >&2
    fi
    sleep 1
    waited=$((waited + 1))
  done
  APT_LOCK_LEFT=$((timeout - waited))
  return 0
}

apt_install() {
  local who="${APT_WHO:-apt}"
  export DEBIAN_FRONTEND=noninteractive
  apt_wait_for_lock "$who" || return 1
  # apt-get waits for the lock itself too (another install may start
  # between the check and now).
  local opt=(-o "DPkg::Lock::Timeout=${APT_LOCK_LEFT:-60}")
  apt-get "${opt[@]}" update -qq && apt-get "${opt[@]}" install -y -qq "$@" >/dev/null
}
