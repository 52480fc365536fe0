#!/bin/bash
# record.sh FIO TAG: records fio's output in every mode testdata holds, with
# the fio binary FIO, as $OUT/TAG-<mode> (OUT defaults to .), and the
# command lines in $OUT/TAG-commands.txt. The data file is
# /tmp/numbers/fio/data (8 MiB, made by the first run); the client/server
# runs start two servers of the same build on 127.0.0.1:8917 and :8918.
set -u
FIO=$1; TAG=$2; OUT=${OUT:-.}
JOB=$(cd "$(dirname "$0")/.." && pwd)/fio-client-server-job.fio
mkdir -p /tmp/numbers/fio
COMMON="--filename=/tmp/numbers/fio/data --ioengine=psync --bs=4k --size=8M --runtime=1 --time_based"
run() { # mode, fio's arguments...
  local name=$1; shift
  echo "$FIO $* > $TAG-$name" >> "$OUT/$TAG-commands.txt"
  "$FIO" "$@" > "$OUT/$TAG-$name" || echo "FAILED $name" >> "$OUT/$TAG-commands.txt"
}
: > "$OUT/$TAG-commands.txt"
run json-randrw.json --name=randrw $COMMON --rw=randrw --rwmixread=70 --output-format=json
run jsonplus-randrw.json --name=randrw $COMMON --rw=randrw --rwmixread=70 --output-format=json+
run json-normal-randrw.txt --name=randrw $COMMON --rw=randrw --rwmixread=70 --output-format=json,normal
run json-unified-rw.json --name=randrw $COMMON --rw=randrw --rwmixread=70 --unified_rw_reporting=1 --output-format=json
run jsonplus-unified-rw.json --name=randrw $COMMON --rw=randrw --rwmixread=70 --unified_rw_reporting=1 --output-format=json+
run json-group-reporting.json --name=grp $COMMON --rw=randread --numjobs=2 --group_reporting --output-format=json
run jsonplus-group-reporting.json --name=grp $COMMON --rw=randread --numjobs=2 --group_reporting --output-format=json+
run json-two-jobs.json --name=nogrp $COMMON --rw=randread --numjobs=2 --output-format=json
run jsonplus-two-jobs.json --name=nogrp $COMMON --rw=randread --numjobs=2 --output-format=json+
# Direct I/O: latencies of the disk, in fio's wider bins; and runs of
# exactly 100, 1000 and 2000 reads, whose percentile thresholds are whole
# counts (where fio's arithmetic decides between two samples).
D="--filename=/tmp/numbers/fio/data --ioengine=psync --bs=4k --direct=1 --rw=randread --output-format=json+"
run jsonplus-direct-randread.json --name=direct $D --size=8M --runtime=1 --time_based
run jsonplus-hundred-ios.json --name=hundred $D --size=400k
run jsonplus-thousand-ios.json --name=thousand $D --size=4000k
run jsonplus-two-thousand-ios.json --name=two-thousand $D --size=8000k
# Client/server.
"$FIO" --server=127.0.0.1,8917 > /dev/null 2>&1 & S1=$!
"$FIO" --server=127.0.0.1,8918 > /dev/null 2>&1 & S2=$!
echo "$FIO --server=127.0.0.1,8917 & $FIO --server=127.0.0.1,8918 &" >> "$OUT/$TAG-commands.txt"
sleep 2
run json-client-server-one.json --client=127.0.0.1,8917 "$JOB" --output-format=json
run jsonplus-client-server-one.json --client=127.0.0.1,8917 "$JOB" --output-format=json+
run json-client-server-two.json --client=127.0.0.1,8917 "$JOB" --client=127.0.0.1,8918 "$JOB" --output-format=json
run jsonplus-client-server-two.json --client=127.0.0.1,8917 "$JOB" --client=127.0.0.1,8918 "$JOB" --output-format=json+
kill $S1 $S2
wait $S1 $S2 2>/dev/null
