#!/usr/bin/env python3
"""The drills of scripts/regions (its header says what each does and checks).

    drill.py DIR N [--seconds S] [--region R] [--schedules K]

Setup (when the bed does not hold it yet): K schedules (default 1,000) "@every 1s", schedule i
homed in region i mod R with the next region as its only fallback, plus K/10 without a
region, deployed as workflow `regions-drill` version 1 (PUT /workflows/{id}/versions/{v})
through the first region whose kairos is ready. Overlap `allow` (a run's report, crossing
regions, never holds up the next tick) and catch-up `fire_immediately` (a tick planned late
is still a tick).

Each drill: a baseline, the outage (kill or cut) for S seconds, the return (revive or heal),
a settle time, then the checks over the window [outage - 10 s, return + 30 s], from the
executors' records (REGIONS_DIR/records/*.jsonl) and schedule_runs. Prints one table; exits
1 when a check fails, 2 when the drill could not run.
"""

import argparse
import dataclasses
import datetime
import hashlib
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the repository
import bed  # noqa: E402

WORKFLOW = "regions-drill"
PSQL = os.path.join(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"), "psql")
# Launches of surviving regions must reach an executor this soon after their tick.
LATENCY_LIMIT_S = 5.0
# What a fallback launch may take beyond fallback_after_s: a probe interval and a probe's
# timeout to see the home unready (3 s), and 2 s to claim and publish.
FALLBACK_SLACK_S = 5.0
# Before the outage: ticks of this long before it are in the window too.
PRE_S = 10
# After the return: ticks up to this long after it are in the window.
POST_S = 30
# After the window ends: how long late launches may still take to arrive.
GRACE_S = 20


def log(message):
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


class Fail(Exception):
    pass


# --- the bed ---------------------------------------------------------------------------


class Bed:
    def __init__(self, root):
        self.root = root
        self.state = bed.load(root)
        self.regions = self.state["regions"]
        self.fallback_after_s = self.state["fallback_after_s"]

    def ha(self):
        values = bed.read_ha_state(self.state)
        if values is None:
            raise Fail("no PostgreSQL in the bed")
        return values

    def database_url(self):
        return f"postgres://postgres@127.0.0.1:{self.ha()['HAPROXY_PORT']}/kairos"

    def psql(self, sql, timeout=60):
        out = subprocess.run(
            [PSQL, "-X", "-qAt", "-F", "\t", self.database_url(), "-c", sql],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            raise Fail(f"psql: {out.stderr.strip()}")
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def script(self, *args):
        env = dict(os.environ, REGIONS_DIR=self.root)
        out = subprocess.run(
            [os.path.join(REPO, "scripts", "regions"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if out.returncode != 0:
            raise Fail(f"scripts/regions {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def status(self):
        return json.loads(self.script("status"))

    def kairos_urls(self):
        return {
            r: [f"http://127.0.0.1:{p}" for p in self.state["region"][r]["http"]]
            for r in self.regions
        }

    def stream_region(self, name):
        """The region (cluster) whose server holds stream `name`, or None."""
        for r in self.regions:
            port = self.state["region"][r]["monitor"]
            code, body = bed.http_get(
                f"http://127.0.0.1:{port}/jsz?accounts=true&streams=true", 2.0
            )
            if code != 200:
                continue
            try:
                info = json.loads(body)
            except ValueError:
                continue
            for account in info.get("account_details", []):
                for stream in account.get("stream_detail", []):
                    if stream.get("name") == name:
                        return (stream.get("cluster") or {}).get("name") or r
        return None

    def records_path(self, region):
        return os.path.join(self.root, "records", f"{region}.jsonl")


def http(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


# --- the schedules ---------------------------------------------------------------------


def plan_schedules(regions, count):
    """[(schedule_id, home or None, fallback or None)]"""
    result = []
    for i in range(count):
        home = regions[i % len(regions)]
        fallback = regions[(i + 1) % len(regions)]
        result.append((f"rd-{home}-{i:04d}", home, fallback))
    for j in range(count // 10):
        result.append((f"rd-none-{j:04d}", None, None))
    return result


def setup(the_bed, count):
    schedules = plan_schedules(the_bed.regions, count)
    rows = the_bed.psql(
        f"select schedule_id, coalesce(region, ''), array_to_string(fallback_regions, ',') "
        f"from schedules where workflow_id = '{WORKFLOW}'"
    )
    have = {row[0]: (row[1] or None, row[2] or None) for row in rows}
    want = {sid: (home, fallback) for sid, home, fallback in schedules}
    if have == want:
        return schedules, False
    body = {
        "dag": {"nodes": [{"id": "run"}]},
        "schedules": [
            dict(
                {
                    "schedule_id": sid,
                    "user_id": "drill",
                    "cron_expr": "@every 1s",
                    "timezone": "UTC",
                    "start_at": "2020-01-01T00:00:00Z",
                    "overlap_policy": "allow",
                    "catchup_policy": "fire_immediately",
                },
                **({"region": home, "fallback_regions": [fallback]} if home else {}),
            )
            for sid, home, fallback in schedules
        ],
    }
    last = None
    for region, urls in the_bed.kairos_urls().items():
        for url in urls:
            code, answer = http("PUT", f"{url}/workflows/{WORKFLOW}/versions/1", body, timeout=120)
            if code in (200, 201):
                log(f"deployed {len(schedules)} schedules through {region}'s kairos ({code})")
                return schedules, True
            last = f"{url}: {code} {answer[:500]}"
    raise Fail(f"deploy refused: {last}")


# --- records ---------------------------------------------------------------------------


def parse_time(text):
    if text is None:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Records:
    """The executors' records, read from given offsets on."""

    def __init__(self, the_bed):
        self.bed = the_bed
        self.offsets = {}
        self.items = []

    def mark(self):
        for r in self.bed.regions:
            try:
                self.offsets[r] = os.path.getsize(self.bed.records_path(r))
            except OSError:
                self.offsets[r] = 0
        self.items = []

    def read(self):
        for r in self.bed.regions:
            path = self.bed.records_path(r)
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(r, 0))
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            self.offsets[r] = self.offsets.get(r, 0) + end
            for line in data[:end].splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                rec["at"] = r
                rec["tick"] = parse_time(rec.get("scheduled_for"))
                self.items.append(rec)
        return self.items

    def newest_received(self):
        """region (executor) -> newest received_at."""
        newest = {}
        for rec in self.read():
            newest[rec["at"]] = max(newest.get(rec["at"], 0), rec["received_at"])
        return newest


def key_of(schedule_id, tick):
    return hashlib.sha256(f"{schedule_id}:{tick}".encode()).hexdigest()


def quantile(values, q):
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


class WriteProbe:
    """Commits a transaction through HAProxy every 0.5 s (in the `postgres` database, not
    kairos's): when PostgreSQL took no writes during the drill, and for how long."""

    def __init__(self, the_bed):
        import threading

        self.url = the_bed.database_url().rsplit("/", 1)[0] + "/postgres"
        self.samples = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def run(self):
        env = dict(os.environ, PGCONNECT_TIMEOUT="1")

        def write(sql):
            try:
                return (
                    subprocess.run(
                        [PSQL, "-X", "-qAt", self.url, "-c", sql],
                        capture_output=True,
                        env=env,
                        timeout=2,
                    ).returncode
                    == 0
                )
            except subprocess.TimeoutExpired:
                return False

        # A row, not just a transaction id: a commit that wrote nothing does not wait for the
        # synchronous standby.
        write("create table if not exists regions_write_probe (at timestamptz)")
        while not self.stopped.is_set():
            at = time.time()
            ok = write("insert into regions_write_probe values (now())")
            self.samples.append((at, ok))
            self.stopped.wait(max(0.0, 0.5 - (time.time() - at)))

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=5)

    def blocked(self):
        """[(from, to)] stretches without a write."""
        spans, since = [], None
        for at, ok in self.samples:
            if not ok and since is None:
                since = at
            elif ok and since is not None:
                spans.append((since, at))
                since = None
        if since is not None:
            spans.append((since, self.samples[-1][0]))
        return spans


# --- waiting ---------------------------------------------------------------------------


def wait_healthy(the_bed, timeout=600):
    """Every region's kairos ready, PostgreSQL with a leader and a streaming sync standby."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        status = the_bed.status()
        problems = []
        for r, region in status["regions"].items():
            if region["killed"] or region["cut"]:
                problems.append(f"{r} is {'killed' if region['killed'] else 'cut'}")
            for k in region["kairos"]:
                if not k["ready"]:
                    problems.append(f"kairos {k['url']} ({r}) not ready")
            if not region["executor"]["pid"]:
                problems.append(f"executor of {r} not running")
        pg = status["postgres"]
        roles = sorted(
            m["role"] for m in pg["members"] if m.get("state") in ("running", "streaming")
        )
        if roles != ["leader", "sync_standby"]:
            problems.append(
                "PostgreSQL members: "
                + ", ".join(f"{m['name']} {m['role']} {m.get('state')}" for m in pg["members"])
            )
        if not problems:
            return status
        if "; ".join(problems) != last:
            last = "; ".join(problems)
            log(f"waiting for the bed: {last}")
        time.sleep(2)
    raise Fail(f"the bed is not healthy after {timeout}s: {last}")


def wait_flowing(the_bed, records, groups, timeout=120):
    """Until every executor of a region with schedules has received a launch in the last 3 s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        newest = records.newest_received()
        now = time.time()
        idle = [r for r in groups if now - newest.get(r, 0) > 3]
        if not idle:
            return
        time.sleep(1)
    raise Fail(f"no launches reach the executors of {', '.join(idle)}")


# --- one drill -------------------------------------------------------------------------


def choose_region(the_bed, asked, status):
    if asked:
        if asked not in the_bed.regions:
            raise Fail(f"--region {asked}: not a region of the bed ({' '.join(the_bed.regions)})")
        return asked
    pg = the_bed.state["pg_regions"]
    free = [r for r in the_bed.regions if r not in pg]
    if free:
        return free[0]
    leader = status["postgres"]["leader_region"]
    return next(r for r in pg if r != leader)


def run_drill(the_bed, number, kind, seconds, asked_region, schedules, rtt):
    status = wait_healthy(the_bed)
    if kind == "kill-primary":
        target = status["postgres"]["leader_region"]
        if not target:
            raise Fail("PostgreSQL has no leader")
        action, undo, what = "kill", "revive", f"kill {target} (PostgreSQL's primary region)"
    else:
        target = choose_region(the_bed, asked_region, status)
        action, undo = ("kill", "revive") if kind == "kill" else ("cut", "heal")
        what = f"{action} {target}"
    first = the_bed.state.get("global_region") or the_bed.regions[0]
    none_region = the_bed.stream_region("KAIROS_LAUNCH")
    records = Records(the_bed)
    records.mark()
    groups = sorted({home for _, home, _ in schedules if home}) + (
        [first] if any(h is None for _, h, _ in schedules) else []
    )
    log(f"drill {number}: {what} for {seconds} s at RTT {rtt} ms")
    wait_flowing(the_bed, records, set(groups))
    time.sleep(PRE_S + 2)
    probe = WriteProbe(the_bed).start()
    t0 = time.time()
    the_bed.script(action, target)
    log(f"{action} {target}")
    deadline = t0 + seconds
    while time.time() < deadline:
        time.sleep(min(10, max(0, deadline - time.time())))
        if time.time() < deadline:
            log(f"{int(deadline - time.time())} s of the outage left")
    # The return counts from the moment it is asked for (a healed link forwards before the
    # verb returns).
    t1 = time.time()
    the_bed.script(undo, target)
    # For a revive: once its nats-server answers again (what the verb waits for).
    back = time.time()
    log(f"{undo} {target}")
    window_start = math.floor(t0) - PRE_S
    window_end = math.floor(t1) + POST_S
    until = window_end + GRACE_S
    log(f"settling until {time.strftime('%H:%M:%S', time.localtime(until))}")
    while time.time() < until:
        time.sleep(1)
    probe.stop()
    recs = [
        r
        for r in records.read()
        if r["tick"] is not None and window_start <= r["tick"] <= window_end
    ]
    runs = the_bed.psql(
        "select idempotency_key, status, coalesce(launch_region, '') from schedule_runs "
        f"where run_at >= to_timestamp({window_start}) and run_at <= to_timestamp({window_end}) "
        "and schedule_id like 'rd-%'",
        timeout=120,
    )
    return evaluate(
        the_bed,
        Drilled(
            number=number,
            what=what,
            target=target,
            kind=kind,
            rtt=rtt,
            schedules=schedules,
            recs=recs,
            runs=runs,
            t0=t0,
            t1=t1,
            back=back,
            window_start=window_start,
            window_end=window_end,
            none_region=none_region,
            first=first,
            blocked=probe.blocked(),
        ),
    )


@dataclasses.dataclass
class Drilled:
    """What one drill did and saw, for `evaluate`."""

    number: object
    what: str
    target: str
    kind: str
    rtt: int
    # (schedule id, home region or None, fallback region or None)
    schedules: list
    # The executors' records of the drill's window.
    recs: list
    # (key, status, launch region) of the window's runs in schedule_runs.
    runs: list
    # When the outage began, when its end was asked for, and when the region was back.
    t0: float
    t1: float
    back: float
    # The ticks counted: whole seconds from window_start to window_end.
    window_start: int
    window_end: int
    # Where KAIROS_LAUNCH lives, and the bed's global region.
    none_region: str
    first: str
    # Stretches in which PostgreSQL took no writes.
    blocked: list


def evaluate(the_bed, drilled):
    number, what, target, kind, rtt = (
        drilled.number,
        drilled.what,
        drilled.target,
        drilled.kind,
        drilled.rtt,
    )
    schedules, recs, runs, blocked = drilled.schedules, drilled.recs, drilled.runs, drilled.blocked
    t0, t1, back = drilled.t0, drilled.t1, drilled.back
    window_start, window_end = drilled.window_start, drilled.window_end
    none_region, first = drilled.none_region, drilled.first
    home_of = {sid: home for sid, home, _ in schedules}
    fallback_of = {sid: fallback for sid, _, fallback in schedules}
    by_key = {}
    for rec in recs:
        by_key.setdefault(rec["key"], []).append(rec)
    affected = {target}
    # Schedules without a region: their stream lives in none_region, their executor in
    # `first` (the bed's global region).
    none_affected = target in (none_region, first)
    checks = []

    # 1. No key received twice: one stream message per key (a redelivery of the same stream
    # message, unacknowledged in time, is not a second message).
    twice = []
    redelivered = 0
    for key, got in by_key.items():
        messages = {(r["stream"], r["seq"]) for r in got}
        if len(messages) > 1:
            twice.append(key)
        redelivered += len(got) - len(messages)
    example = ""
    if twice:
        got = by_key[twice[0]]
        example = "; e.g. " + ", ".join(
            f"{r['at']}:{r['stream']}#{r['seq']} region={r.get('region')}"
            for r in got
        )
    checks.append(
        (
            "no key received twice",
            not twice,
            f"{len(twice)} of {len(by_key)} keys in two messages "
            f"({redelivered} redeliveries of one message){example}",
        )
    )

    # 2. No tick lost.
    status_of = {row[0]: (row[1], row[2]) for row in runs}
    expected = {}
    for sid, _, _ in schedules:
        for tick in range(window_start, window_end + 1):
            expected[key_of(sid, tick)] = (sid, tick)
    lost = [k for k in expected if k not in by_key]
    reasons = {}
    for k in lost:
        st = status_of.get(k, ("no row", ""))
        label = f"{st[0]}{'@' + st[1] if st[1] else ''}"
        reasons[label] = reasons.get(label, 0) + 1
    unexpected = sum(1 for k in by_key if k not in expected)
    lost_detail = f"{len(lost)} of {len(expected)} ticks"
    if lost:
        lost_detail += (
            " (in schedule_runs: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) + ")"
        )
        sid, tick = expected[lost[0]]
        lost_detail += f"; e.g. {sid} at {iso(tick)}"
    if unexpected:
        lost_detail += f"; {unexpected} received keys are no whole-second tick of a drill schedule"
    checks.append(("no tick lost", not lost, lost_detail))

    # 3. Launches of the surviving regions within LATENCY_LIMIT_S, per executor region. When
    # the primary's region is lost, nothing can be claimed or recorded until Patroni promotes
    # the standby (its leader key must expire first: Patroni's ttl, 20 s at least), so for
    # drill 3 a tick due while PostgreSQL took no writes counts from the first write after.
    def due(tick):
        if kind != "kill-primary":
            return tick
        for start, end in blocked:
            if start - LATENCY_LIMIT_S <= tick <= end:
                return max(tick, end)
        return tick

    delays = {}
    # The surviving regions' delays the check judges (from `due`, not the tick).
    judged = {}
    affected_delays = {}
    # Where the time went: tick -> stored in the stream (kairos's side), stored -> received
    # (the executor's side).
    stored = {}
    for rec in recs:
        sid = rec["schedule_id"]
        if sid not in home_of:
            continue
        home = home_of[sid]
        hit = (home in affected) if home else none_affected
        label = rec["at"] if home else f"{rec['at']} (no region)"
        delay = rec["received_at"] - rec["tick"]
        side = hit or rec["at"] in affected
        (affected_delays if side else delays).setdefault(label, []).append(delay)
        if not side:
            judged.setdefault(label, []).append(rec["received_at"] - due(rec["tick"]))
        if rec.get("stored_at") is not None:
            stored.setdefault((label, side), []).append(rec["stored_at"] - rec["tick"])
    slow = {label: max(v) for label, v in judged.items() if max(v) > LATENCY_LIMIT_S}
    checks.append(
        (
            f"surviving launches <= {LATENCY_LIMIT_S:g} s"
            + (" (of writes resuming)" if kind == "kill-primary" else ""),
            bool(judged) and not slow,
            "; ".join(
                f"{label}: {len([d for d in judged[label] if d > LATENCY_LIMIT_S])} late"
                for label in sorted(slow)
            )
            or ("every launch in time" if judged else "no launches of surviving regions"),
        )
    )

    # 4. The affected region's schedules: in their fallback region (the message's `region`
    # is the fallback, received there), or at home.
    kinds = {
        "home": 0,
        "home, late after the return": 0,
        "fallback": 0,
        "elsewhere": 0,
    }
    for got in by_key.values():
        rec = got[0]
        sid = rec["schedule_id"]
        home = home_of.get(sid)
        if home not in affected:
            continue
        where = rec.get("region")
        if where == home and rec["at"] == home:
            kinds[
                "home, late after the return"
                if rec["received_at"] > t1 and rec["tick"] < t1
                else "home"
            ] += 1
        elif where == fallback_of[sid] and rec["at"] == where:
            kinds["fallback"] += 1
        else:
            kinds["elsewhere"] += 1
    bad = kinds["elsewhere"]
    moved = kinds["fallback"] + kinds["home, late after the return"]
    # How late the fallback launches were: a run waits while its home is unready, at most
    # one probe interval and a probe's timeout (3 s) to be seen unready, then
    # fallback_after_s until the home is away.
    fallback_delays = [
        got[0]["received_at"] - due(got[0]["tick"])
        for got in by_key.values()
        if home_of.get(got[0]["schedule_id"]) in affected
        and got[0].get("region") == fallback_of.get(got[0]["schedule_id"])
        and got[0]["at"] == got[0].get("region")
    ]
    checks.append(
        (
            f"{target}'s runs: fallback or late at home",
            bad == 0 and moved > 0,
            ", ".join(f"{n} {label}" for label, n in kinds.items() if n)
            + ("" if moved else "; none moved or waited: was the region lost at all?"),
        )
    )

    fallback_limit = the_bed.fallback_after_s + FALLBACK_SLACK_S
    slowest = max(fallback_delays, default=0.0)
    checks.append(
        (
            f"fallback launches <= {fallback_limit:g} s",
            slowest <= fallback_limit,
            f"{len(fallback_delays)} in their fallback, the latest {slowest:.1f} s after its tick "
            f"(fallback_after_s {the_bed.fallback_after_s} + {FALLBACK_SLACK_S:g} s to see the loss)",
        )
    )

    # 5. Back home after the return, within fallback_after_s: the last tick of an affected
    # schedule that did not land at home (fallback or nowhere), after the region is back
    # (healed, or its revived nats-server answering).
    last_away = None
    for sid, home, _ in schedules:
        if home not in affected:
            continue
        for tick in range(math.floor(back), window_end + 1):
            got = by_key.get(key_of(sid, tick))
            at_home = got and got[0].get("region") == home
            if not at_home and (last_away is None or tick > last_away):
                last_away = tick
    back_after = 0.0 if last_away is None else max(0.0, last_away + 1 - back)
    limit = the_bed.fallback_after_s
    checks.append(
        (
            f"back home within {limit} s",
            back_after <= limit,
            f"every tick from {back_after:.1f} s after {target} was back on launched at home",
        )
    )

    # The table.
    failed = [c for c in checks if not c[1]]
    print()
    print(
        f"drill {number}: {what}, {int(t1 - t0)} s, RTT {rtt} ms; "
        f"ticks {iso(window_start)} .. {iso(window_end)}; "
        f"{len(schedules)} schedules; KAIROS_LAUNCH in {none_region}"
    )
    width = max(len(c[0]) for c in checks)
    for name, ok, detail in checks:
        print(f"  {name:<{width}}  {'PASS' if ok else 'FAIL'}  {detail}")
    print(
        f"  {'tick to executor (s), by executor':<{width}}        "
        f"{'p50':>6} {'p99':>6} {'max':>6}  launches  "
        f"(of which tick to stream: p50 p99)"
    )

    def row(label, values, key):
        s_values = stored.get(key, [])
        split = (
            f"{quantile(s_values, 0.5):6.2f} {quantile(s_values, 0.99):6.2f}" if s_values else ""
        )
        print(
            f"  {label:<{width}}        {quantile(values, 0.5):6.2f} {quantile(values, 0.99):6.2f} "
            f"{max(values):6.2f}  {len(values):8d}  {split}"
        )

    for label, values in sorted(delays.items()):
        row(label, values, (label, False))
    for label, values in sorted(affected_delays.items()):
        row(label + " [affected]", values, (label, True))
    spans = "; ".join(f"{iso(a)} .. {iso(b)} ({b - a:.0f} s)" for a, b in blocked) or "never"
    print(f"  {'PostgreSQL took no writes':<{width}}        {spans}")
    sys.stdout.flush()
    return not failed


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%H:%M:%S")


def main():
    parser = argparse.ArgumentParser(prog="scripts/regions drill")
    parser.add_argument("root")
    parser.add_argument("number", type=int, choices=[1, 2, 3, 4])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--region")
    parser.add_argument("--schedules", type=int, default=1000)
    args = parser.parse_args()
    the_bed = Bed(args.root)
    if not the_bed.state["region_support"]:
        print(
            f"scripts/regions: {the_bed.state['kairos_bin']} does not know regions: no drill",
            file=sys.stderr,
        )
        return 2
    if args.seconds < 1 or args.schedules < len(the_bed.regions):
        print(
            "scripts/regions: --seconds must be at least 1 and --schedules at least the "
            "number of regions",
            file=sys.stderr,
        )
        return 2
    control = bed.read_json(os.path.join(args.root, "control.json"), {})
    rtt = int(control.get("rtt_ms", the_bed.state["rtt_ms"]))
    try:
        wait_healthy(the_bed)
        schedules, fresh = setup(the_bed, args.schedules)
        if fresh:
            # Let the planner and dispatchers reach their steady state first.
            time.sleep(15)
        drills = {1: "kill", 2: "cut", 3: "kill-primary"}
        if args.number in drills:
            ok = run_drill(
                the_bed, args.number, drills[args.number], args.seconds, args.region, schedules, rtt
            )
        else:
            bed.control(args.root, "rtt", "100")
            log("RTT 100 ms between regions for drill 4")
            try:
                ok = True
                for number in (1, 2, 3):
                    ok = (
                        run_drill(
                            the_bed,
                            f"4.{number}",
                            drills[number],
                            args.seconds,
                            args.region,
                            schedules,
                            100,
                        )
                        and ok
                    )
            finally:
                bed.control(args.root, "rtt", str(rtt))
                log(f"RTT back to {rtt} ms")
    except Fail as err:
        print(f"scripts/regions drill: {err}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
