#!/usr/bin/env bash
# End to end: `ahbm worker`s on 127.0.0.1 (ephemeral ports) serving `ahbm sweep` and
# `ahbm milestone`; a worker that dies or freezes; mutual TLS; shards and merge; --resume.
# Every report is compared byte for byte with the same run done locally (cluster/README.md).
set -uo pipefail
ahbm=$PWD/cli/ahbm
tmp=${TEST_TMPDIR:-$(mktemp -d)}
cd "$tmp" || exit 1
ln -sfn "$OLDPWD/topology" topology
failures=0
pids=()
declare -A worker_pid
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cleanup() {
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

# start_worker <name> <flags...>: a worker in the background; its port in $port.
start_worker() {
  local name=$1
  shift
  rm -f "$name.port"
  "$ahbm" worker --listen=127.0.0.1:0 --port_file="$name.port" "$@" >"$name.log" 2>&1 &
  pids+=($!)
  pid=$!
  worker_pid[$name]=$pid
  for _ in $(seq 200); do [[ -s $name.port ]] && break; sleep 0.05; done
  port=$(cat "$name.port" 2>/dev/null)
  [[ -n $port ]] || fail "worker $name did not start: $(cat "$name.log")"
}

same() {  # same <what> <file a> <file b>
  cmp -s "$2" "$3" || fail "$1: $2 and $3 differ"
}

grid=(--topology=topology/small.textproto --kernel=decode --h_q=8 --h_kv=2 --p=4
      --param=s --values=1024,2048,4096,8192 --param=variant --values=opt1,opt3,opt2)
sweep() { timeout 300 "$ahbm" sweep "${grid[@]}" "$@"; }

sweep --out_dir=local >local.out 2>local.err || fail "local sweep exited $?: $(cat local.err)"
[[ $(grep -c ',ok$' local/sweep.csv) -eq 12 ]] || fail "local sweep: not 12 ok rows"

# 1. Two workers, nothing local: the report equals the local one.
start_worker w1 --jobs=2
p1=$port
start_worker w2 --jobs=1
p2=$port
sweep --out_dir=two --workers=127.0.0.1:$p1,127.0.0.1:$p2 --local=false >two.out 2>two.err ||
  fail "sweep on two workers exited $?: $(cat two.err)"
same "two workers" local/sweep.csv two/sweep.csv
same "two workers" local/sweep.json two/sweep.json
same "two workers (table)" local.out two.out
grep -qE "cluster: 127.0.0.1:$p1 [0-9]+ jobs, 127.0.0.1:$p2 [0-9]+ jobs" two.err ||
  fail "no jobs per worker: $(cat two.err)"
grep -q "took job" w1.log && grep -q "took job" w2.log || fail "a worker took no job"

# Workers and this machine's cores together (--local defaults to true).
sweep --out_dir=mixed --workers=127.0.0.1:$p2 --jobs=1 >mixed.out 2>mixed.err ||
  fail "sweep on a worker and local cores exited $?: $(cat mixed.err)"
same "a worker and local cores" local/sweep.csv mixed/sweep.csv
grep -qE "cluster: 127.0.0.1:$p2 [0-9]+ jobs, local [0-9]+ jobs" mixed.err ||
  fail "no jobs per worker: $(cat mixed.err)"
grep -qE "^sweep: 12 of 12 runs done; jobs per worker: 127.0.0.1:$p2 [0-9]+, local [0-9]+$" \
  mixed.err || fail "no progress line with the jobs per worker: $(cat mixed.err)"

# A client killed mid-run: the worker goes on serving the next one.
taken=$(grep -c "took job" w2.log)
sweep --workers=127.0.0.1:$p2 --local=false >/dev/null 2>&1 &
client=$!
for _ in $(seq 400); do [[ $(grep -c "took job" w2.log) -gt $taken ]] && break; sleep 0.02; done
kill -9 $client
wait $client 2>/dev/null
sweep --out_dir=after_kill --workers=127.0.0.1:$p2 --local=false >/dev/null 2>after_kill.err ||
  fail "the worker did not serve after a client was killed: $(cat after_kill.err)"
same "after a killed client" local/sweep.csv after_kill/sweep.csv

# 2. A worker that exits after taking 3 jobs: its jobs run elsewhere, the same report.
start_worker dying --jobs=1 --exit_after_jobs=3
sweep --out_dir=died --workers=127.0.0.1:$port,127.0.0.1:$p1 --local=false >died.out 2>died.err ||
  fail "sweep with a dying worker exited $?: $(cat died.err)"
same "dying worker" local/sweep.csv died/sweep.csv
grep -q "exiting after 3 jobs" dying.log || fail "the dying worker did not exit: $(cat dying.log)"
grep -qE "worker 127.0.0.1:$port lost .*; jobs [0-9]+ run elsewhere" died.err ||
  fail "no line naming the re-run jobs: $(cat died.err)"
grep -qE "re-run after a loss: jobs [0-9]+ \(127.0.0.1:$port\)" died.err ||
  fail "the summary names no re-run job: $(cat died.err)"

# 3. A frozen worker (SIGSTOP) after it took a job: the timeout re-runs its jobs.
start_worker frozen --jobs=1
frozen_pid=$pid
sweep --out_dir=froze --workers=127.0.0.1:$port,127.0.0.1:$p1 --local=false --worker_timeout=3 \
  >froze.out 2>froze.err &
sweep_pid=$!
for _ in $(seq 400); do grep -q "took job" frozen.log && break; sleep 0.02; done
kill -STOP "$frozen_pid"
wait "$sweep_pid" || fail "sweep with a frozen worker exited $?: $(cat froze.err)"
kill -CONT "$frozen_pid"
same "frozen worker" local/sweep.csv froze/sweep.csv
grep -q "lost (no answer in time (--worker_timeout))" froze.err ||
  fail "the frozen worker was not timed out: $(cat froze.err)"

# 4. Shards 0/3, 1/3, 2/3 merged equal the unsharded report.
for i in 0 1 2; do
  sweep --shard=$i/3 --out_dir=shard$i >shard$i.out 2>shard$i.err ||
    fail "shard $i exited $?: $(cat shard$i.err)"
  [[ ! -e shard$i/sweep.csv ]] || fail "shard $i wrote a report"
done
timeout 60 "$ahbm" merge shard0 shard1 shard2 --out_dir=merged >merged.out 2>merged.err ||
  fail "merge exited $?: $(cat merged.err)"
same "merged shards" local/sweep.csv merged/sweep.csv
same "merged shards" local/sweep.json merged/sweep.json
same "merged shards (table)" local.out merged.out
out=$("$ahbm" merge shard0 shard2 --out_dir=part 2>&1)
[[ $? -eq 2 && $out == "ahbm merge: shard 1/3 missing" ]] || fail "merge of 2 of 3 shards: $out"

# 5. --resume after a stopped sweep equals an uninterrupted one: the only worker exits at its
# 3rd job, the sweep fails naming the jobs not done, --resume runs only those.
start_worker stopper --jobs=1 --exit_after_jobs=3
sweep --out_dir=resumed --workers=127.0.0.1:$port --local=false >stopped.out 2>stopped.err
rc=$?
[[ $rc -eq 1 ]] || fail "the stopped sweep exited $rc, want 1"
last='^ahbm sweep: jobs 2, 3, .* not done \(job 2: not done: no worker left .*--resume$'
grep -qE "$last" stopped.err || fail "the stopped sweep's last line: $(tail -1 stopped.err)"
[[ $(ls resumed/jobs/*.result | wc -l) -eq 2 ]] || fail "the stopped sweep kept not 2 results"
sweep --out_dir=resumed --resume >resumed.out 2>resumed.err || fail "resume exited $?"
grep -q "store: 2 jobs taken from resumed/jobs, 10 run" resumed.err ||
  fail "resume did not take the kept results: $(cat resumed.err)"
same "resumed" local/sweep.csv resumed/sweep.csv
same "resumed (table)" local.out resumed.out

# 6. Mutual TLS: a CA, a worker's and a client's certificate; a client of another CA.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ca \
  2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 \
  -subj /CN=other 2>/dev/null
for leaf in worker:ca client:ca stranger:other; do
  name=${leaf%%:*} ca=${leaf##*:}
  openssl req -newkey rsa:2048 -nodes -keyout $name.key -out $name.csr -subj /CN=$name 2>/dev/null
  openssl x509 -req -in $name.csr -CA $ca.crt -CAkey $ca.key -CAcreateserial -out $name.crt \
    -days 2 2>/dev/null
done
[[ -s worker.crt && -s client.crt && -s stranger.crt ]] || fail "openssl made no certificates"
out=$("$ahbm" worker --listen=127.0.0.1:0 --port_file=bad.port --tls_cert=worker.crt \
  --tls_key=client.key --tls_ca=ca.crt 2>&1)
rc=$?
want="ahbm worker: --tls_key: client.key does not match the certificate in worker.crt"
[[ $rc -eq 2 && $out == "$want" ]] || fail "a worker with a mismatched key: $out"
[[ ! -e bad.port ]] || fail "a worker with a mismatched key listened"
start_worker tls --jobs=2 --tls_cert=worker.crt --tls_key=worker.key --tls_ca=ca.crt
tls_port=$port
sweep --out_dir=stranger --workers=127.0.0.1:$tls_port --local=false --worker_timeout=10 \
  --tls_cert=stranger.crt --tls_key=stranger.key --tls_ca=ca.crt >/dev/null 2>stranger.err
[[ $? -ne 0 ]] || fail "a client of another CA was served"
grep -q "^ahbm sweep: --workers: none reached (127.0.0.1:$tls_port: " stranger.err ||
  fail "a client of another CA: $(cat stranger.err)"
sweep --out_dir=plain --workers=127.0.0.1:$tls_port --local=false --worker_timeout=10 \
  >/dev/null 2>plain.err
[[ $? -ne 0 ]] || fail "a plain client was served by a TLS worker"
grep -q "took job" tls.log && fail "the TLS worker took a job from an unauthenticated client"
sweep --out_dir=tls --workers=127.0.0.1:$tls_port --local=false --tls_cert=client.crt \
  --tls_key=client.key --tls_ca=ca.crt >tls.out 2>tls.err ||
  fail "sweep over TLS exited $?: $(cat tls.err)"
same "TLS worker (still serving after the refusals)" local/sweep.csv tls/sweep.csv

# 7. A worker of another build: refused with one line.
start_worker other --build_digest=0123456789abcdef
out=$(sweep --workers=127.0.0.1:$port 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 2 && $(wc -l <<<"$out") -eq 1 ]] || fail "another build: exit $rc, $out"
want="refused this client: build digest [0-9a-f]{16} differs from the worker's 0123456789abcdef"
[[ $out =~ ^"ahbm sweep: --workers: 127.0.0.1:$port "$want ]] || fail "another build: $out"

# 8. The milestone (a small one) through two workers, and as three shards merged: the same
# report files as a local run.
ms=(--quick --studies=tile --panels=single_user_decode --variants=opt1,opt3)
report_files="milestone.csv milestone.json sweep_tile.csv sweep_tile.svg timeline.csv timeline.svg
  index.html"
timeout 600 "$ahbm" milestone "${ms[@]}" --out_dir=ms_local >ms_local.out 2>ms_local.err ||
  fail "local milestone exited $?: $(tail -1 ms_local.err)"
timeout 600 "$ahbm" milestone "${ms[@]}" --out_dir=ms_two --local=false \
  --workers=127.0.0.1:$p1,127.0.0.1:$p2 >ms_two.out 2>ms_two.err ||
  fail "milestone on workers exited $?: $(tail -1 ms_two.err)"
for i in 0 1 2; do
  timeout 600 "$ahbm" milestone "${ms[@]}" --out_dir=ms_shard$i --shard=$i/3 >/dev/null \
    2>ms_shard$i.err || fail "milestone shard $i exited $?: $(tail -1 ms_shard$i.err)"
done
timeout 600 "$ahbm" merge ms_shard0 ms_shard1 ms_shard2 --out_dir=ms_merged >ms_merged.out \
  2>ms_merged.err || fail "milestone merge exited $?: $(tail -1 ms_merged.err)"
for f in $report_files; do
  same "milestone on workers" ms_local/$f ms_two/$f
  same "milestone merged" ms_local/$f ms_merged/$f
done
for run in ms_local ms_two ms_merged; do grep -v '^wrote ms_' $run.out >$run.table; done
same "milestone on workers (stdout)" ms_local.table ms_two.table
same "milestone merged (stdout)" ms_local.table ms_merged.table

# Every worker not told to exit is still serving (a crash, or a sanitizer's report, ends it).
for name in w1 w2 frozen tls other; do
  kill -0 "${worker_pid[$name]}" 2>/dev/null || fail "worker $name is gone: $(tail -3 "$name.log")"
done
grep -l "Sanitizer\|runtime error" ./*.log && fail "a sanitizer report in a worker's log"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "cluster_test: all passed"
