#!/usr/bin/env bash
# Makes sure the demo lab's tools are there: OpenSSH's server (the demo lab
# host) and fio. As root it installs them from Debian's packages; otherwise
# it says exactly what to run.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v fio >/dev/null 2>&1 || need+=(fio)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools: installing ${need[*]} (the demo lab needs them)"
  # shellcheck source=apt.sh
  source "$(dirname "$0")/apt.sh"
  APT_WHO=ensure-tools apt_install "${need[@]}"
  # Installing openssh-server may start the system's sshd on port 22; the
  # demo lab runs its own on 127.0.0.1:2222 and does not need it.
else
  echo "ensure-tools: the demo lab needs ${need[*]}: run  sudo apt-get install ${need[*]}  then make run again" >&2
  exit 1
fi
