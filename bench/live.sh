#!/usr/bin/env bash
# bench/live.sh — a mount as the live writer (docs/performance.md), each figure against a baseline measured in this
# same run of the script:
#   1. `tail -n 1 -f -s 0.1 MNT/sessions/bench/events.jsonl` of a live session while a driver appends one
#      whole turn (15 events, valid per docs/writing.md) every 100 ms through MNT/sessions/bench/append and
#      then `flush` to its ctl, at two session sizes: SMALL (default 10000 events) and BIG (default 500000),
#      each a bench/gensession zstd session (it ends at a turn boundary: checked, since a writer continues a
#      balanced session) copied afresh for every run. After WARM warm-up batches (the first makes the session
#      live; tail starts after it), BATCHES batches (default 30) are timed: per batch the latency from the
#      flush returning until tail prints the batch's turn/end line (0 when tail printed it before the flush
#      returned: the views show accepted events at once; also given from the append's write), and the mount process's CPU time (utime + stime
#      from /proc/PID/stat, 10 ms ticks) and stats.json renderedBytes/extendedBytes over the BATCHES batches.
#      Ratio: BIG's CPU per batch over SMALL's (flat is 1×); latency against the 0.3 s target. With BASE set
#      to a revision (bench_base in bench/common.sh), the same runs of that build's mount alternate with
#      this build's.
#   2. SESSIONS sessions (default 1000, of PER=2000 events each, zstd, generated once and cached) each
#      appended one turn through one mount (`append`, then `echo flush > MNT/ctl`), then left idle: the
#      mount's VmHWM after the appends and its VmRSS and stats.json liveResident/liveBytes once idle, with the
#      default configuration against `[writer] live_bytes = 0` and `live_idle = "0s"` (every live engine
#      keeps its log) as the baseline in the same run; ratio baseline / default and the 256 MiB target.
# Medians of RUNS (default 3) runs, the builds and configurations alternating. Every mount is served by a
# separate `dshfs mount` process; this script and its drivers only use it from outside. Not run by CI.
# Needs: fuse3 (fusermount3) unless run as root, python3, jq.
# Env: SMALL BIG BATCHES WARM SESSIONS PER RUNS BASE BENCH_DIR; SKIP="tail many" (any subset) skips parts.
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=${SMALL:-10000}
BIG=${BIG:-500000}
BATCHES=${BATCHES:-30}
WARM=${WARM:-3}
SESSIONS=${SESSIONS:-1000}
PER=${PER:-2000}
RUNS=${RUNS:-3}
SKIP=${SKIP:-}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}/live
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession
bench_base
DSHFS="$WORK/dshfs"
skip() { [[ " $SKIP " == *" $1 "* ]]; }

# --- helpers -----------------------------------------------------------------------------------------------
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b+0 == 0 || a == "nan" || b == "nan") print "n/a"; else printf "%.2fx", a/b}'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
SUMMARY=()
row() { SUMMARY+=("$(printf '%-60s| %-20s| %-20s| %s' "$1" "$2" "$3" "$4")"); }

XDG="$WORK/xdg"
: >"$WORK/default.toml" # the default configuration, whatever the user's own says
trap unmount_all EXIT
MNT="$WORK/mnt"

# turn.py TURN SEQ: one whole turn (15 events) as the append file takes it, numbered TURN, its first event
# seq SEQ (sourceEventSeqs name the events it answers); shared by both drivers
cat >"$WORK/turn.py" <<'PY'
import json
MODEL = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}
def turn(t, seq):
    out = []
    def add(typ, data, **kw):
        ev = {"type": typ, "data": data}
        ev.update(kw)
        out.append(json.dumps(ev, separators=(",", ":")))
    add("turn/start", {"turn": t})
    add("step/start", {"turn": t, "step": 1})
    add("user/message", {"id": "u-%d" % t, "role": "user", "content": [{"type": "text", "text": "Run step %d of the build." % t}], "source": {"kind": "user"}}, surfaceOp="append")
    first = seq + len(out)
    for k in range(4):
        add("assistant/chunk", {"turn": t, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "word%d " % k}})
    call = "call-%d" % t
    args = json.dumps({"command": "make test"}, separators=(",", ":"))
    add("assistant/message", {"turn": t, "step": 1, "message": {"id": "a-%d-1" % t, "role": "assistant", "content": [{"type": "text", "text": "Running it."}, {"type": "tool-call", "id": call, "name": "bash", "arguments": args}], "source": MODEL}}, sourceEventSeqs=[first, first + 1, first + 2, first + 3], surfaceOp="append")
    call_seq = seq + len(out)
    add("tool/call", {"turn": t, "step": 1, "callId": call, "name": "bash", "arguments": args})
    add("tool/result", {"turn": t, "step": 1, "message": {"id": "t-%d" % t, "role": "user", "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": "FAIL pkg/b"}], "isError": False}], "source": {"kind": "tool", "callId": call}}}, sourceEventSeqs=[call_seq], surfaceOp="append")
    add("step/end", {"turn": t, "step": 1})
    add("step/start", {"turn": t, "step": 2})
    add("assistant/message", {"turn": t, "step": 2, "message": {"id": "a-%d-2" % t, "role": "assistant", "content": [{"type": "text", "text": "pkg/b fails."}], "source": MODEL}}, surfaceOp="append")
    add("step/end", {"turn": t, "step": 2})
    add("turn/end", {"turn": t, "reason": {"kind": "completed"}})
    return ("\n".join(out) + "\n").encode()
def put(path, data):
    import os
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
PY

# follow.py MNT PID TURN SEQ WARM BATCHES: appends a turn every 100 ms (one write(2) to append, then flush to
# ctl), with tail -f following events.jsonl; prints one JSON line of figures
cat >"$WORK/follow.py" <<'PY'
import json, os, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from turn import turn, put
mnt, pid, t0, seq, warm, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sess = mnt + "/sessions/bench"
TICK = os.sysconf("SC_CLK_TCK")
def cpu():
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
def stats():
    with open(mnt + "/stats.json") as f:
        s = json.load(f)
    return s.get("renderedBytes"), s.get("extendedBytes")
seen, cond = {}, threading.Condition()
def follow(p):
    for line in p.stdout:
        if b'"type":"turn/end"' in line:
            t = json.loads(line)["data"]["turn"]
            with cond:
                seen.setdefault(t, time.monotonic())
                cond.notify_all()
def await_turn(t, limit=30):
    with cond:
        if not cond.wait_for(lambda: t in seen, timeout=limit):
            sys.exit("tail did not print turn %d within %d s" % (t, limit))
def batch(t):
    global seq
    data = turn(t, seq)
    put(sess + "/append", data)
    put(sess + "/ctl", b"flush\n")
    seq += data.count(b"\n")
    return time.monotonic()
t = t0
batch(t); t += 1  # the first append makes the session live (its log read and checked once)
# tail -n 1: its first line (that turn's end) says it has opened the file and reached its end
tail = subprocess.Popen(["tail", "-n", "1", "-f", "-s", "0.1", sess + "/events.jsonl"], stdout=subprocess.PIPE)
threading.Thread(target=follow, args=(tail,), daemon=True).start()
await_turn(t - 1)
for _ in range(warm):
    batch(t); await_turn(t); t += 1; time.sleep(0.1)
r0, e0 = stats()
c0, w0 = cpu(), time.monotonic()
flushed, started = {}, {}
for i in range(n):
    due = w0 + 0.1 * i
    time.sleep(max(0, due - time.monotonic()))
    started[t + i] = time.monotonic()
    flushed[t + i] = batch(t + i)
await_turn(t + n - 1)
for i in range(n):
    await_turn(t + i)
c1 = cpu()
r1, e1 = stats()
tail.kill()
lat = sorted(max(0.0, seen[k] - v) for k, v in flushed.items())
wlat = sorted(seen[k] - v for k, v in started.items())
d = lambda a, b: None if a is None or b is None else b - a
print(json.dumps({"cpu_per_batch": round((c1 - c0) / TICK / n, 4), "lat_median": round(lat[(len(lat) - 1) // 2], 3), "lat_max": round(lat[-1], 3),
                  "wlat_median": round(wlat[(len(wlat) - 1) // 2], 3), "wlat_max": round(wlat[-1], 3), "rendered": d(r0, r1), "extended": d(e0, e1)}))
PY

echo "dshfs live-writer benchmarks: SMALL=$SMALL BIG=$BIG BATCHES=$BATCHES WARM=$WARM SESSIONS=$SESSIONS PER=$PER RUNS=$RUNS${BASE:+ BASE=$BASE}"
echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load average: $(loadavg)"
STEAL0=$(steal_ticks)

# --- 1. tail -f of a live session, SMALL against BIG --------------------------------------------------------
# store_for N: sets SRC to a cached zstd store of one session "bench" of >= N events, and LASTTURN/NEXTSEQ
store_for() {
  SRC="$WORK/load-$1"
  if [ ! -d "$SRC" ]; then "$WORK/gensession" -mode zstd -id bench "$SRC" "$1"; fi
  local last
  last=$("$DSHFS" cat --view events "$SRC" bench | tail -n 1)
  if [ "$(jq -r .type <<<"$last")" != turn/end ]; then
    echo "live.sh: the generated session does not end at a turn boundary: $last" >&2; exit 1
  fi
  LASTTURN=$(jq .data.turn <<<"$last")
  NEXTSEQ=$(( $(jq .seq <<<"$last") + 1 ))
}
# follow_run BIN N: one run on a fresh copy of the N-event store; prints follow.py's JSON line
follow_run() {
  local bin=$1 n=$2 copy="$WORK/run-store"
  store_for "$n"
  rm -rf "$copy" && cp -a "$SRC" "$copy"
  mount_with "$bin" "$copy" "$MNT" --config "$WORK/default.toml"
  python3 "$WORK/follow.py" "$MNT" "$MPID" $((LASTTURN + 1)) "$NEXTSEQ" "$WARM" "$BATCHES"
  unmount_store "$MNT"
}
if ! skip tail; then
  echo
  echo "== 1. tail -f -s 0.1 of a live session, one 15-event turn appended and flushed every 100 ms"
  store_for "$SMALL"; store_for "$BIG" # generated before anything is timed
  declare -A R=()
  builds=(cur)
  [ -n "$BASEBIN" ] && builds+=(base)
  for i in $(seq "$RUNS"); do
    for b in "${builds[@]}"; do
      bin=$DSHFS; [ "$b" = base ] && bin=$BASEBIN
      for n in "$SMALL" "$BIG"; do
        out=$(follow_run "$bin" "$n")
        echo "  run $i, $b build, $n events: $out"
        R[$b-$n]+="$out"$'\n'
      done
    done
  done
  field() { printf '%s' "${R[$1]}" | jq -r ".$2 // \"nan\"" | median; }
  for b in "${builds[@]}"; do
    label="this build"; [ "$b" = base ] && label="base $(git rev-parse --short "$BASE")"
    for n in "$SMALL" "$BIG"; do
      c=$(field "$b-$n" cpu_per_batch); lm=$(field "$b-$n" lat_median); lx=$(field "$b-$n" lat_max)
      wm=$(field "$b-$n" wlat_median); wx=$(field "$b-$n" wlat_max)
      rb=$(field "$b-$n" rendered); eb=$(field "$b-$n" extended)
      echo "  $label, $n events: CPU $(awk -v c="$c" 'BEGIN{printf "%.1f", c*1000}') ms/batch, latency from the flush median ${lm} s max ${lx} s (from the append's write ${wm} s / ${wx} s), over $BATCHES batches $(if [ "$rb" = nan ]; then echo "(no renderedBytes/extendedBytes in stats.json)"; else echo "renderedBytes +$rb extendedBytes +$eb"; fi) (medians of $RUNS)"
      row "$label: tail -f of $n ev: latency median / max" "${lm} s / ${lx} s" "target 0.3 s" "max $(ratio "$lx" 0.3) of the target"
      row "$label: the same, from the append's write" "${wm} s / ${wx} s" "" ""
      row "$label: $n ev: rendered / extended bytes per batch" "$(awk -v r="$rb" -v e="$eb" -v n="$BATCHES" 'BEGIN{if (r=="nan") print "n/a"; else printf "%.0f / %.0f B", r/n, e/n}')" "" ""
      eval "cpu_$b$([ "$n" = "$SMALL" ] && echo small || echo big)=$c"
    done
    small_var="cpu_${b}small"; big_var="cpu_${b}big"
    row "$label: mount CPU per batch, $BIG vs $SMALL ev" "$(awk -v c="${!big_var}" 'BEGIN{printf "%.1f ms", c*1000}')" "$(awk -v c="${!small_var}" 'BEGIN{printf "%.1f ms", c*1000}')" "$(ratio "${!big_var}" "${!small_var}") (flat = 1x)"
  done
  if [ -n "$BASEBIN" ]; then
    row "$BIG ev: mount CPU per batch, base vs this build" "$(awk -v c="$cpu_basebig" 'BEGIN{printf "%.1f ms", c*1000}')" "$(awk -v c="$cpu_curbig" 'BEGIN{printf "%.1f ms", c*1000}')" "$(ratio "$cpu_basebig" "$cpu_curbig")"
  fi
fi

# --- 2. a thousand live sessions, then idle -----------------------------------------------------------------
# many.py MNT PID BUDGET TURN SEQ ID...: appends one turn to every session, then flushes the store and waits
# until nothing is pending and, with a BUDGET (bytes; 0: none), the logs held are within it; prints one JSON
# line of figures
cat >"$WORK/many.py" <<'PY'
import json, os, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from turn import turn, put
mnt, pid, budget, t, seq, ids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
def status(name):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])  # KiB
def read(name):
    with open(mnt + "/" + name) as f:
        return json.load(f)
data = turn(t, seq)
s = time.monotonic()
for i in ids:
    put(mnt + "/sessions/" + i + "/append", data)
put(mnt + "/ctl", b"flush\n")
appended = time.monotonic() - s
hwm_appends = status("VmHWM")
deadline = time.monotonic() + 120
while True:  # idle: every batch written and, with a budget, the logs held within it
    st, stats = read("status.json"), read("stats.json")
    if st.get("pending", 0) == 0 and (budget == 0 or stats.get("liveBytes", 0) <= budget):
        break
    if time.monotonic() > deadline:
        sys.exit("the mount did not settle: %s %s" % (st, stats))
    time.sleep(0.5)
time.sleep(2)  # let the collector return what the released logs held
st, stats = read("status.json"), read("stats.json")
print(json.dumps({"append_s": round(appended, 2), "hwm_appends_kib": hwm_appends, "hwm_kib": status("VmHWM"), "rss_idle_kib": status("VmRSS"),
                  "live": st.get("live"), "liveResident": stats.get("liveResident"), "liveBytes": stats.get("liveBytes"),
                  "liveReleased": stats.get("liveReleased"), "liveReloaded": stats.get("liveReloaded")}))
PY
if ! skip many; then
  echo
  echo "== 2. $SESSIONS sessions of >= $PER events, one turn appended to each through one mount, then idle"
  many_sessions "$SESSIONS" "$PER"
  last=$("$DSHFS" cat --view events "$MANY" s00000 | tail -n 1)
  lastN=$("$DSHFS" cat --view events "$MANY" "$(printf 's%05d' $((SESSIONS - 1)))" | tail -n 1)
  if [ "$(jq -r .type <<<"$last")" != turn/end ] || [ "$(jq -c '[.seq, .data.turn]' <<<"$last")" != "$(jq -c '[.seq, .data.turn]' <<<"$lastN")" ]; then
    echo "live.sh: the generated sessions do not all end at the same turn boundary" >&2; exit 1
  fi
  printf '[writer]\nlive_bytes = 0\nlive_idle = "0s"\n' >"$WORK/nobudget.toml"
  ids=$(seq -f 's%05g' 0 $((SESSIONS - 1)))
  declare -A M=()
  for i in $(seq "$RUNS"); do
    for cfg in default nobudget; do
      copy="$WORK/many-run"
      rm -rf "$copy" && cp -a "$MANY" "$copy"
      mount_with "$DSHFS" "$copy" "$MNT" --config "$WORK/$cfg.toml"
      # shellcheck disable=SC2086
      budget=$((32 << 20)); [ "$cfg" = nobudget ] && budget=0 # [writer] live_bytes
      out=$(python3 "$WORK/many.py" "$MNT" "$MPID" "$budget" $(( $(jq .data.turn <<<"$last") + 1 )) $(( $(jq .seq <<<"$last") + 1 )) $ids)
      echo "  run $i, $cfg: $out"
      M[$cfg]+="$out"$'\n'
      unmount_store "$MNT"
    done
  done
  rm -rf "$WORK/many-run"
  mfield() { printf '%s' "${M[$1]}" | jq -r ".$2 // \"nan\"" | median; }
  for cfg in default nobudget; do
    echo "  $cfg: appends $(mfield "$cfg" append_s) s, VmHWM after the appends $(( $(mfield "$cfg" hwm_appends_kib) / 1024 )) MiB, at the end $(( $(mfield "$cfg" hwm_kib) / 1024 )) MiB, VmRSS idle $(( $(mfield "$cfg" rss_idle_kib) / 1024 )) MiB, live $(mfield "$cfg" live), liveResident $(mfield "$cfg" liveResident), liveBytes $(mfield "$cfg" liveBytes), liveReleased $(mfield "$cfg" liveReleased) (medians of $RUNS)"
  done
  d=$(mfield default hwm_kib); nb=$(mfield nobudget hwm_kib)
  row "$SESSIONS live sessions: VmHWM, default vs live_bytes = 0" "$((d / 1024)) MiB" "$((nb / 1024)) MiB" "$(ratio "$nb" "$d") less; $(ratio "$d" 262144) of the 256 MiB target"
  row "$SESSIONS live sessions idle: VmRSS, default vs live_bytes = 0" "$(( $(mfield default rss_idle_kib) / 1024 )) MiB" "$(( $(mfield nobudget rss_idle_kib) / 1024 )) MiB" "$(ratio "$(mfield nobudget rss_idle_kib)" "$(mfield default rss_idle_kib)") less"
  row "$SESSIONS live sessions idle: sessions live / logs resident" "$(mfield default live) / $(mfield default liveResident)" "$(mfield nobudget live) / $(mfield nobudget liveResident)" ""
fi

echo
echo "== summary (medians; ratio column as stated; load average now: $(loadavg); steal: $(( ($(steal_ticks) - STEAL0) / $(getconf CLK_TCK) )) s)"
printf '%-60s| %-20s| %-20s| %s\n' "measure" "dshfs" "baseline" "ratio"
printf '%s\n' "${SUMMARY[@]}"
