#!/bin/sh
# build.sh TAG DIR: builds fio's release TAG (fio-2.19, …) from a bare
# clone of axboe/fio ($FIO_GIT) into DIR, on Debian 12 (gcc 12, glibc
# 2.36, Linux 6 headers), with fio's source unchanged: the two shims in
# compat/ go in on the compiler's command line (see compat/*.h).
set -e
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$2"
git --git-dir="$FIO_GIT" archive "$1" | tar x -C "$2"
cd "$2"
flags="-fcommon -I$here/compat -include $here/compat/fio2-glibc.h"
# fio 2.1's configure has no --disable-lex (it has no lex/yacc to disable).
./configure --extra-cflags="$flags" --disable-lex || ./configure --extra-cflags="$flags"
make
./fio --version
