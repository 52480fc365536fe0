#!/usr/bin/env bash
# Makes sure what the tests need is installed: fio, OpenSSH's server and
# client, Chromium (its driver and its headless shell), tc, openssl, wrk, xmllint, curl, patch,
# fuser, and, as root, Prometheus (whose packaged service is kept from
# starting: the tests start their own on loopback). As root it installs what
# is missing from Debian's packages; otherwise it says exactly what to run.
# Run by make test and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=apt.sh
source .ci/apt.sh
need=()
command -v patch >/dev/null 2>&1 || need+=(patch)
command -v fuser >/dev/null 2>&1 || need+=(psmisc)
command -v fio >/dev/null 2>&1 || need+=(fio)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium chromium-driver)
# The browser tests drive the headless shell: the same engine, about half the CPU.
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v sha256sum >/dev/null 2>&1 || need+=(coreutils)
command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  # Without Prometheus the production watch's tests skip, saying so.
  if [ ${#need[@]} -gt 0 ]; then
    echo "ensure-test-tools: the tests need ${need[*]}: run  sudo apt-get install ${need[*]}  then make test again" >&2
    exit 1
  fi
  exit 0
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "ensure-test-tools: installing ${need[*]}"
  APT_WHO=ensure-test-tools apt_install "${need[@]}"
fi
# Prometheus for the production watch's tests (jobs/promtest starts its own
# on loopback). The package's service is not wanted: tests run their own,
# so it is kept from starting, and stopped and disabled should it start.
if [ ! -x /usr/bin/prometheus ]; then
  echo "ensure-test-tools: installing prometheus"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && remove_policy=1
  fi
  APT_WHO=ensure-test-tools apt_install --no-install-recommends prometheus
  [ -z "${remove_policy:-}" ] || rm -f /usr/sbin/policy-rc.d
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
  if [ -x /etc/init.d/prometheus ]; then /etc/init.d/prometheus stop >/dev/null 2>&1 || true; update-rc.d prometheus disable >/dev/null 2>&1 || true; fi
fi
