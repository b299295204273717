#!/usr/bin/env bash
# `ahbm slurm` on a real Slurm: a one-node cluster brought up by tools/slurm_cluster.sh in a
# temporary folder (Debian's slurmctld, slurmd and munge; root needed, tools/setup.sh installs
# them). A small sweep as a 3-task job array and its merge job equals the local sweep byte for
# byte; a task that fails has its exit code passed on, the merge not run, and one line naming
# it; --resume then runs only what is missing. Everything is torn down by pid, and the test
# checks that no daemon, job step or folder is left. Skipped, saying why, only when not root.
set -uo pipefail
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: a private Slurm cluster's slurmd must run as root (uid $(id -u) here)"
  exit 0
fi
runfiles=$PWD
ahbm=$runfiles/cli/ahbm
source "$runfiles/tools/slurm_cluster.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for tool in munged slurmctld slurmd sbatch squeue scancel sinfo; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found: run tools/setup.sh"; exit 1; }
done

steps_before=$(pgrep -c -x slurmstepd)
# Under /tmp, not TEST_TMPDIR: munged's socket path must fit a sockaddr_un (108 bytes).
tmp=$(mktemp -d /tmp/ahbm-slurm.XXXXXX)
chmod 711 "$tmp"  # munged wants every folder of its socket's path traversable by all
cluster=$tmp/cluster
cleanup() {
  slurm_cluster_down "$cluster"
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/work" "$tmp/shared"
cd "$tmp/work" || exit 1
ln -s "$runfiles/topology" topology

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
start=$(date +%s%N)
slurm_cluster_up "$cluster" || { echo "FAIL: the cluster did not come up"; exit 1; }
echo "cluster up in $(ms_since "$start") ms"
read -r -a daemons < <(cat "$cluster"/*.bgpid)

same() {  # same <what> <file a> <file b>
  cmp -s "$2" "$3" || fail "$1: $2 and $3 differ"
}

# stand_in FILE CONDITION ACTION: an ahbm for --ahbm that does ACTION when CONDITION holds (a
# failure where Slurm runs it) and otherwise runs the real one.
stand_in() {
  printf '#!/bin/bash\nif %s; then %s; fi\nexec %q "$@"\n' "$2" "$3" "$ahbm" >"$1"
  chmod +x "$1"
}

# submit NAME WANT_RC FLAGS...: `ahbm slurm sweep` of the grid, 3 tasks, --wait, its output in
# NAME.out and NAME.err; a failure unless it exits WANT_RC.
submit() {
  local name=$1 want=$2
  shift 2
  "$ahbm" slurm sweep "${grid[@]}" --tasks=3 --wait "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [[ $rc -eq $want ]] || fail "$name: ahbm slurm exited $rc, want $want: $(cat "$name.err")"
}

grid=(--topology=topology/small.textproto --kernel=decode --h_q=8 --h_kv=2 --p=4
      --param=s --values=1024,2048 --param=variant --values=opt1,opt3,opt2)
"$ahbm" sweep "${grid[@]}" --out_dir=local >local.out 2>local.err || fail "local sweep: $?"

# 1. --dry_run: the scripts and the sbatch commands; nothing submitted or written.
out=$("$ahbm" slurm sweep "${grid[@]}" --tasks=3 --out_dir="$tmp/shared/dry" --dry_run 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "--dry_run exited $rc: $out"
grep -qx '#SBATCH --array=0-2' <<<"$out" || fail "--dry_run printed no --array=0-2: $out"
merge_line="sbatch --parsable --dependency=afterok:<array job id>"
merge_line+=" $tmp/shared/dry/slurm/merge.sbatch"
grep -qxF "$merge_line" <<<"$out" || fail "--dry_run printed no merge submission: $out"
[[ ! -e $tmp/shared/dry/slurm ]] || fail "--dry_run wrote $tmp/shared/dry/slurm"
[[ -z $(squeue -h) ]] || fail "--dry_run submitted: $(squeue -h)"

# 2. The array and its merge: the report equals the local sweep's, byte for byte.
start=$(date +%s%N)
submit ok 0 --out_dir="$tmp/shared/ok"
echo "3-task array and merge, submitted and waited for: $(ms_since "$start") ms"
grep -qx 'ahbm slurm: sweep: 6 jobs in 3 array tasks of 1 CPU' ok.out || fail "$(cat ok.out)"
grep -qE '^array job [0-9]+: tasks 0-2, logs ' ok.out || fail "no array job line: $(cat ok.out)"
grep -qE '^merge job [0-9]+ done: the report is in ' ok.out || fail "no done line: $(cat ok.out)"
same "the array's sweep.csv" local/sweep.csv "$tmp/shared/ok/sweep.csv"
same "the array's sweep.json" local/sweep.json "$tmp/shared/ok/sweep.json"
grep -v '^store: ' "$tmp/shared/ok/slurm/merge.log" >merged_table.out
same "the merge job's table" local.out merged_table.out
for i in 0 1 2; do
  grep -q "^shard $i/3: 2 jobs run" "$tmp/shared/ok/slurm/task-$i.log" ||
    fail "task $i's log: $(cat "$tmp/shared/ok/slurm/task-$i.log")"
done

# 3. Task 1 fails (a stand-in for ahbm that exits 7 there): exit 7, one line naming the task,
# the merge not run and nothing left queued.
stand_in fail_task1.sh '[[ ${SLURM_ARRAY_TASK_ID:-} == 1 ]]' 'echo "task 1 fails" >&2; exit 7'
failed=$tmp/shared/failed
submit failed 7 --out_dir="$failed" --ahbm=./fail_task1.sh
array=$(sed -nE 's/^array job ([0-9]+):.*/\1/p' failed.out)
merge=$(sed -nE 's/^merge job ([0-9]+):.*/\1/p' failed.out)
want="ahbm slurm: array job $array: task 1 (shard 1/3) exited 7 (log $failed/slurm/task-1.log);"
want+=" merge job $merge not run; submit again with --resume to run only the jobs without a result"
[[ $(cat failed.err) == "$want" ]] || fail "the failed array's line: $(cat failed.err)"
[[ ! -e $failed/sweep.csv && ! -e $failed/slurm/merge.exit ]] || fail "the merge ran"
[[ -z $(squeue -h) ]] || fail "left in the queue: $(squeue -h)"

# 4. A task whose batch shell dies (as at a time limit) leaves no exit code: named, exit 1.
stand_in kill_task2.sh '[[ ${SLURM_ARRAY_TASK_ID:-} == 2 ]]' 'kill -KILL $PPID'
killed=$tmp/shared/killed
submit killed 1 --out_dir="$killed" --ahbm=./kill_task2.sh
line="task 2 (shard 2/3) left no exit code (cancelled, out of time or its node lost)"
line+=" (log $killed/slurm/task-2.log); merge job"
grep -qF "$line" killed.err || fail "the killed task's line: $(cat killed.err)"

# 5. The merge fails (a stand-in that exits 5 as `ahbm merge`): its exit code and log named.
stand_in fail_merge.sh '[[ $1 == merge ]]' 'exit 5'
submit merge 5 --out_dir="$tmp/shared/merge" --ahbm=./fail_merge.sh
merge=$(sed -nE 's/^merge job ([0-9]+):.*/\1/p' merge.out)
want="ahbm slurm: merge job $merge exited 5 (log $tmp/shared/merge/slurm/merge.log)"
[[ $(cat merge.err) == "$want" ]] || fail "the failed merge's line: $(cat merge.err)"

# 6. Submitted again with --resume: only task 1's jobs run; the report equals the local one.
submit resumed 0 --out_dir="$failed" --resume
same "the resumed array's sweep.csv" local/sweep.csv "$failed/sweep.csv"
same "the resumed array's sweep.json" local/sweep.json "$failed/sweep.json"
grep -q '^store: 2 jobs taken from .*/shards/0/jobs, 0 run' "$failed/slurm/task-0.log" ||
  fail "task 0 ran again: $(cat "$failed/slurm/task-0.log")"
grep -q '^shard 1/3: 2 jobs run' "$failed/slurm/task-1.log" ||
  fail "task 1's log: $(cat "$failed/slurm/task-1.log")"

# 7. Down: every daemon gone (waited for), no job step left, the folder removed.
trap - EXIT
cleanup
for pid in "${daemons[@]}"; do
  ! kill -0 "$pid" 2>/dev/null || fail "daemon $pid still runs: $(ps -o args= -p "$pid")"
done
[[ $(pgrep -c -x slurmstepd) -le $steps_before ]] || fail "slurmstepd left: $(pgrep -a slurmstepd)"
[[ ! -e $tmp ]] || fail "$tmp left behind"

if [[ $failures -ne 0 ]]; then
  echo "$failures failed"
  exit 1
fi
echo "PASS"
