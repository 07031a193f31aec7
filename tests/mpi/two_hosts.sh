#!/bin/sh
# two_hosts.sh — 2 MPI ranks on two "hosts" that share no network: two network namespaces made for
# this run, joined by a veth pair (10.213.0.1 <-> 10.213.0.2, addresses that exist only inside them),
# with Open MPI restricted to its TCP transport (btl self,tcp; pml ob1, so neither shared memory nor
# UCX is used) on that subnet. mpirun runs in the first namespace and starts the second rank's daemon
# through an rsh agent that enters the namespace of the host it is given (`ip netns exec`), since
# there is no ssh. Checks:
#   1. tests/mpi/hello_allreduce: an exact allreduce, the 2 ranks in 2 distinct network namespaces;
#   2. a network partition (B's link down mid-job) ends the job within 30 s when the runtime's TCP
#      keepalive is tuned (see below), with mpirun naming the lost daemon;
#   3. with GPTC_BIN built with MPI (its `train --help` lists --bucket-mb) and DATA given: `gptc
#      train` on the 2 namespaces (--batch 2 per rank, 0.05 MB gradient buckets) logs the same
#      losses (--log-losses, full precision) as 1 rank with --batch 4, within LOSS_RTOL (default
#      1e-5) relative at every step.
# Prints "PASS: ..." per check; "SKIP: <reason>" and exit 0 when not root, when mpirun/mpicc are
# missing or when namespaces cannot be made; "FAIL: ..." and exit 1 otherwise. Everything it makes
# (namespaces, veth, temp folder, processes) is removed on exit.
# Usage: [GPTC_BIN=build/gptc DATA=dir] [TWO_HOSTS_BENCH=MAX_MIB] sh tests/mpi/two_hosts.sh
# (TWO_HOSTS_BENCH also prints hello_allreduce --bench over the veth link, for docs/scaling.md)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
GPTC_BIN=${GPTC_BIN:-}
DATA=${DATA:-}
rtol=${LOSS_RTOL:-1e-5}

if [ "$(id -u)" != 0 ]; then echo "SKIP: not root (network namespaces need CAP_NET_ADMIN)"; exit 0; fi
for tool in mpirun mpicc ip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool not found (install openmpi-bin, libopenmpi-dev and iproute2: sh tools/setup.sh)"
        exit 0
    fi
done

id=$$
nsa="gptc-a-$id" nsb="gptc-b-$id"
veth_a="gva$id" veth_b="gvb$id"
addr_a=10.213.0.1 addr_b=10.213.0.2
work=$(mktemp -d "${TMPDIR:-/tmp}/gptc-2hosts-XXXXXX")
made_a="" made_b="" job=""

cleanup() {
    [ -n "$job" ] && kill -KILL "$job" 2>/dev/null || true
    # processes left in our namespaces (only ours: the namespaces were made by this run)
    for ns in $made_a $made_b; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
    done
    # deleting a namespace destroys the veth end inside it, and with it the pair
    [ -n "$made_a" ] && ip netns del "$nsa" 2>/dev/null || true
    [ -n "$made_b" ] && ip netns del "$nsb" 2>/dev/null || true
    ip link del "$veth_a" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() { echo "FAIL: $*"; exit 1; }

if ! ip netns add "$nsa" 2>"$work/netns.err"; then
    echo "SKIP: cannot make network namespaces here (ip netns add: $(head -n 1 "$work/netns.err"))"
    exit 0
fi
made_a=$nsa
ip netns add "$nsb" || fail "ip netns add $nsb"
made_b=$nsb
ip link add "$veth_a" type veth peer name "$veth_b" || fail "cannot make a veth pair"
ip link set "$veth_a" netns "$nsa"
ip link set "$veth_b" netns "$nsb"
ip -n "$nsa" addr add "$addr_a/24" dev "$veth_a"
ip -n "$nsb" addr add "$addr_b/24" dev "$veth_b"
for ns in "$nsa" "$nsb"; do
    ip -n "$ns" link set lo up
    # a connection with unacknowledged data when the link dies is not covered by keepalive but by
    # retransmission: give up after 5 retries (~13 s) instead of 15 (~15 min); this namespace only
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=5 2>/dev/null || true
done
ip -n "$nsa" link set "$veth_a" up
ip -n "$nsb" link set "$veth_b" up
echo "namespaces $nsa ($addr_a) and $nsb ($addr_b), joined by $veth_a-$veth_b"

# The rsh agent: mpirun calls `agent [ssh options] HOST COMMAND...`; COMMAND is a shell command line
# meant for the remote login shell, run here in HOST's namespace.
cat >"$work/netns-rsh" <<AGENT
#!/bin/sh
# rsh agent for two_hosts.sh: runs a command line "on" $addr_a or $addr_b, i.e. in its namespace
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case \$host in
    $addr_a) ns=$nsa ;;
    $addr_b) ns=$nsb ;;
    *) echo "netns-rsh: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/netns-rsh"

mpicc -O2 -o "$work/hello" "$here/hello_allreduce.c" || fail "mpicc could not build hello_allreduce.c"

# mpirun in namespace A (so A is its local host); B is reached through the agent. Only TCP on the
# veth subnet, for both the runtime (oob) and the data (btl).
mpi2() {
    ip netns exec "$nsa" env SHELL=/bin/sh OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout -k 5 120 mpirun --allow-run-as-root -H "$addr_a,$addr_b" -np 2 \
        --mca plm_rsh_agent "$work/netns-rsh" --mca plm_rsh_no_tree_spawn 1 \
        --mca pml ob1 --mca btl self,tcp --mca mpi_yield_when_idle 1 \
        --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 "$@"
}

set +e
mpi2 "$work/hello" >"$work/hello.log" 2>&1
rc=$?
set -e
cat "$work/hello.log"
[ "$rc" -eq 0 ] || fail "hello_allreduce over 2 namespaces: mpirun exited $rc"
grep -q '^allreduce ok: 2 ranks' "$work/hello.log" || fail "hello_allreduce: no exact allreduce"
grep -q '^network namespaces: 2 distinct of 2 ranks' "$work/hello.log" || fail "the 2 ranks did not run in 2 namespaces"
echo "PASS: allreduce over TCP between 2 network namespaces"
if [ -n "${TWO_HOSTS_BENCH:-}" ]; then
    # optional: allreduce latency and bandwidth over the veth link, up to TWO_HOSTS_BENCH MiB
    mpi2 "$work/hello" --bench "$TWO_HOSTS_BENCH" || fail "hello_allreduce --bench over 2 namespaces"
fi

# A network partition: the link goes down under a running job (no RST, like a dead switch). Ranks
# and daemons stay alive, so only the runtime's TCP keepalive on its daemon connections can notice:
# Open MPI's default (300 s idle + 9 probes x 20 s) leaves the job hanging for 8 minutes; with
# 5 s + 3 x 2 s (and the namespaces' tcp_retries2 at 5, for a connection that had data in flight)
# mpirun must end it within PARTITION_BOUND_S (default 30 s), naming the lost daemon.
pbound=${PARTITION_BOUND_S:-30}
mpi2 --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    "$work/hello" --loop --stamp "$work/stamp" >"$work/partition.log" 2>&1 &
job=$!
waited=0
until [ -s "$work/stamp" ]; do
    kill -0 "$job" 2>/dev/null || { cat "$work/partition.log"; fail "partition: the job ended before it ran"; }
    [ "$waited" -ge 600 ] && { cat "$work/partition.log"; fail "partition: the job did not start in 60 s"; }
    sleep 0.1
    waited=$((waited + 1))
done
ip -n "$nsb" link set "$veth_b" down
t0=$(date +%s.%N)
while kill -0 "$job" 2>/dev/null; do
    [ "$(awk -v a="$t0" -v n="$(date +%s.%N)" -v b="$pbound" 'BEGIN { print (n - a > b) }')" = 1 ] && {
        cat "$work/partition.log"; fail "partition: mpirun still running $pbound s after the link went down"; }
    sleep 0.2
done
set +e
wait "$job"
rc=$?
set -e
job=""
took=$(awk -v a="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - a }')
[ "$rc" -ne 0 ] || { cat "$work/partition.log"; fail "partition: mpirun exited 0"; }
grep -q 'lost communication with a remote daemon' "$work/partition.log" ||
    { cat "$work/partition.log"; fail "partition: output does not name the lost daemon"; }
echo "PASS: partition: mpirun exited $rc $took s after the link went down: ORTE has lost communication with a remote daemon"
ip -n "$nsb" link set "$veth_b" up

if [ -z "$GPTC_BIN" ] || [ -z "$DATA" ]; then
    echo "note: gptc check not run (set GPTC_BIN and DATA)"
    exit 0
fi
if ! "$GPTC_BIN" train --help 2>&1 | grep -q -- '--bucket-mb'; then
    echo "note: gptc check not run: $GPTC_BIN is not built with MPI (no --bucket-mb in gptc train --help)"
    exit 0
fi
gptc_bin=$(cd "$(dirname "$GPTC_BIN")" && pwd)/$(basename "$GPTC_BIN")
common="train --data $DATA --model tiny --seq 32 --steps 6 --warmup 2 --lr 2e-3 --eval-every 0 --eval-batches 1 --threads 1 --seed 7 --quiet"
# shellcheck disable=SC2086
"$gptc_bin" $common --batch 4 --ckpt "$work/one" --log-losses "$work/one.loss" >"$work/one.log" 2>&1 ||
    { cat "$work/one.log"; fail "1-rank gptc train"; }
set +e
# shellcheck disable=SC2086
mpi2 "$gptc_bin" $common --batch 2 --bucket-mb 0.05 --ckpt "$work/two" --log-losses "$work/two.loss" >"$work/two.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$work/two.log"; fail "2-rank gptc train over 2 namespaces: mpirun exited $rc"; }
grep -q '^comm: 2 ranks' "$work/two.log" || { cat "$work/two.log"; fail "the 2-rank run did not run on 2 ranks"; }
# --log-losses: "step loss grad_norm lr" a line, full precision; compared step by step
awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { print $1, a[$1], $2 }' "$work/one.loss" "$work/two.loss" >"$work/both.loss"
awk -v rtol="$rtol" -v want="$(wc -l <"$work/one.loss")" '
    { n++; d = $2 - $3; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : -$2); if (r > max) max = r;
      if (!(r <= rtol)) { bad++; printf "step %s: 1 rank %s, 2 ranks %s\n", $1, $2, $3 } }
    END { printf "losses compared: %d of %d steps, max relative difference %.3g (tolerance %g)\n", n, want, max, rtol;
          exit (bad || n != want || n == 0) ? 1 : 0 }' "$work/both.loss" ||
    { cat "$work/two.log"; fail "2-rank losses differ from the 1-rank run with twice the batch"; }
echo "PASS: gptc train on 2 namespaces matches 1 rank with twice the batch"
