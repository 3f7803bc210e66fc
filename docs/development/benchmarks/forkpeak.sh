#!/bin/bash
# forkpeak.sh KEYS VALUE_BYTES MODE WRITER: the memory a redis-server needs while it forks.
# Starts redis-server in a memory cgroup (v1) of its own under the caller's, fills KEYS keys
# of VALUE_BYTES with redis-benchmark, then runs MODE (bgsave or bgrewriteaof) while a
# writer overwrites random keys of the same key space (WRITER: off; light, 1 client without
# pipelining; on, 4 clients with pipelines of 16), and prints used_memory and the peak of
# the cgroup's anonymous memory (rss of memory.stat, sampled every 50 ms) during the fork.
# Needs root (to make the cgroup), redis-server, redis-cli and redis-benchmark; port 7399.
# docs/rediscluster.md (Memory) has the figures.
set -e
KEYS=$1; SIZE=$2; MODE=$3; WRITER=$4
PORT=7399
own=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
CG=/sys/fs/cgroup/memory$own/forkpeak-$$
mkdir -p $CG
dir=$(mktemp -d /tmp/mem-measure/data.XXXX)
( echo $BASHPID > $CG/cgroup.procs; exec redis-server --port $PORT --bind 127.0.0.1 --save '' --appendonly $([ $MODE = bgrewriteaof ] && echo yes || echo no) --appendfsync no --dir $dir --daemonize no --logfile $dir/log ) &
RPID=$!
sleep 0.5
redis-benchmark -p $PORT -q -t set -r $KEYS -n $((KEYS*3)) -d $SIZE -P 32 -c 4 >/dev/null
used=$(redis-cli -p $PORT info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r')
rss=$(redis-cli -p $PORT info memory | awk -F: '/^used_memory_rss:/{print $2}' | tr -d '\r')
if [ $MODE = bgrewriteaof ]; then while redis-cli -p $PORT info persistence | grep -q 'aof_rewrite_in_progress:1\|aof_rewrite_scheduled:1'; do sleep 0.2; done; fi
base=$(awk '$1=="rss"{print $2}' $CG/memory.stat)
echo 0 > $CG/memory.max_usage_in_bytes
WP=
if [ $WRITER != off ]; then P=16; C=4; [ $WRITER = light ] && P=1 && C=1; redis-benchmark -p $PORT -q -t set -r $KEYS -n 100000000 -d $SIZE -P $P -c $C >/dev/null 2>&1 & WP=$!; sleep 1; fi
t0=$(date +%s.%N)
redis-cli -p $PORT $MODE >/dev/null
sleep 0.3
maxrss=0
sample() { r=$(awk '$1=="rss"{print $2}' $CG/memory.stat); [ $r -gt $maxrss ] && maxrss=$r; true; }
if [ $MODE = bgsave ]; then while redis-cli -p $PORT info persistence | grep -q 'rdb_bgsave_in_progress:1'; do sample; sleep 0.05; done
else while redis-cli -p $PORT info persistence | grep -q 'aof_rewrite_in_progress:1'; do sample; sleep 0.05; done; fi
t1=$(date +%s.%N)
[ -n "$WP" ] && kill $WP && wait $WP 2>/dev/null || true
peak=$(cat $CG/memory.max_usage_in_bytes)
cow=$(redis-cli -p $PORT info persistence | awk -F: '/_last_cow_size:/{print $1"="$2}' | tr -d '\r' | tr '\n' ' ')
used2=$(redis-cli -p $PORT info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r')
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true
wait $RPID 2>/dev/null || true
rmdir $CG; rm -rf $dir
awk -v k=$KEYS -v s=$SIZE -v m=$MODE -v w=$WRITER -v u=$used -v u2=$used2 -v r=$rss -v b=$base -v p=$peak -v mr=$maxrss -v d=$(echo "$t1 - $t0" | bc) -v c="$cow" 'BEGIN{printf "%s writer=%s keys=%d value=%dB used_memory=%.0fMiB(after %.0fMiB) rss=%.0fMiB anon_before=%.0fMiB anon_peak=%.0fMiB anon_peak/used_memory=%.2f cgroup_peak_with_cache=%.0fMiB fork_s=%.1f %s\n", m,w,k,s,u/1048576,u2/1048576,r/1048576,b/1048576,mr/1048576,mr/u,p/1048576,d,c}'
