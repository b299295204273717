#!/usr/bin/env bash
# A one-node Slurm cluster whose every file lives in one folder: for `ahbm slurm`'s test
# (cluster/slurm_test.sh) and for trying `ahbm slurm` on one machine. Needs root and Debian's
# slurmctld, slurmd, slurm-client and munge (tools/setup.sh installs them); no systemd, no
# cgroups. README "Running on a Slurm cluster".
#
#   tools/slurm_cluster.sh up DIR     start munged, slurmctld, slurmd; prints the export line
#   tools/slurm_cluster.sh down DIR   cancel every job, stop the daemons, remove DIR
#
# Sourced, it defines slurm_cluster_up DIR / slurm_cluster_down DIR, which keep the daemons
# children of the calling shell (down waits for them: nothing left, not even a zombie).
#
# What makes it work without a system install: a private munge key (1 KiB from /dev/urandom,
# mode 600) and socket under DIR, DIR mode 711 (munged refuses a socket path others cannot
# traverse); SLURM_CONF naming a slurm.conf with free loopback ports, SlurmUser=root,
# proctrack/linuxproc, task/none, no accounting, cons_tres with CR_CPU, state and spool under
# DIR; MinJobAge=5 and batch_sched_delay=0 (without them `sbatch --wait` takes 10 s more, and a
# MinJobAge under ~4 can lose a job's record before its end is seen).

# A TCP port on 127.0.0.1 that nothing listens on (random, 20000-59999; a connect refused).
slurm_cluster_free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

slurm_cluster_write_conf() {
  local dir=$1
  cat >"$dir/slurm.conf" <<CONF
ClusterName=ahbmtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(slurm_cluster_free_port)
SlurmdPort=$(slurm_cluster_free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MinJobAge=5
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

# slurm_cluster_up DIR: the daemons in the background (their pids in DIR/*.bgpid), SLURM_CONF
# exported; returns once the node is idle (10 s at most), else 1 with the logs' tails. Every
# folder above DIR must let others traverse it (munged checks the socket's path).
slurm_cluster_up() {
  local dir=$1
  local tool
  for tool in munged slurmctld slurmd sinfo; do
    if ! command -v "$tool" >/dev/null; then
      echo "slurm_cluster: $tool not found (tools/setup.sh installs it)" >&2
      return 1
    fi
  done
  mkdir -p "$dir"/{munge,state,spool,log} || return 1
  chmod 711 "$dir" "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
  munged --foreground --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 &
  echo $! >"$dir/munged.bgpid"
  slurm_cluster_write_conf "$dir"
  export SLURM_CONF=$dir/slurm.conf
  local i
  for i in $(seq 100); do [[ -S $dir/munge/munge.socket ]] && break; sleep 0.05; done
  if [[ ! -S $dir/munge/munge.socket ]]; then
    echo "slurm_cluster: munged did not start: $(cat "$dir/log/munged.out")" >&2
    return 1
  fi
  slurmctld -D >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.bgpid"
  slurmd -D -N localhost >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.bgpid"
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    if timeout 2 sinfo -h -o %T 2>/dev/null | grep -qE '^idle'; then return 0; fi
    sleep 0.1
  done
  echo "slurm_cluster: the node did not become idle in 10 s" >&2
  tail -n 5 "$dir"/log/* >&2
  return 1
}

# Whether pid runs (a zombie, ended but not yet reaped, does not).
slurm_cluster_alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}

# slurm_cluster_down DIR: scancel first (a job step outlives slurmd), then each daemon by its
# own pid, waited for when it is this shell's child; then DIR goes.
slurm_cluster_down() {
  local dir=$1
  [[ -d $dir ]] || return 0
  SLURM_CONF=$dir/slurm.conf scancel --user="$(id -un)" 2>/dev/null
  local name pid i
  for name in slurmd slurmctld munged; do
    [[ -f $dir/$name.bgpid ]] || continue
    pid=$(cat "$dir/$name.bgpid")
    kill "$pid" 2>/dev/null
    for i in $(seq 100); do slurm_cluster_alive "$pid" || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$dir"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -uo pipefail
  case ${1:-} in
    up)
      [[ $# -eq 2 ]] || { echo "usage: $0 up DIR" >&2; exit 2; }
      dir=$(realpath -m "$2")
      # Detached from this shell, which exits now: the daemons outlive it.
      slurm_cluster_up "$dir" || { slurm_cluster_down "$dir"; exit 1; }
      disown -a
      echo "export SLURM_CONF=$dir/slurm.conf"
      ;;
    down)
      [[ $# -eq 2 ]] || { echo "usage: $0 down DIR" >&2; exit 2; }
      slurm_cluster_down "$(realpath -m "$2")"
      ;;
    *)
      echo "usage: $0 up DIR | down DIR" >&2
      exit 2
      ;;
  esac
fi
