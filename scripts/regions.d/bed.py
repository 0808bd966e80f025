#!/usr/bin/env python3
"""Helpers of scripts/regions: the bed's layout (ports, configs) and its status.

bed.py plan DIR             choose ports, write DIR/state.json, DIR/state (bash),
                            DIR/links.json, DIR/control.json and each region's nats.conf
                            (settings from the environment, see scripts/regions)
bed.py ha-links DIR         once DIR/ha/state exists: point the database, replication
                            and etcd links at the ports scripts/ha chose
bed.py control DIR cut|heal REGION | rtt MS
                            change what the proxy does; returns once it is in force
bed.py wait-nats DIR [SECONDS]
                            until every region's server is up and JetStream has a meta
                            leader that knows every region's server
bed.py status DIR           one JSON object (scripts/regions status)
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from state_files import read_json, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))




def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def load(root):
    state = read_json(os.path.join(root, "state.json"))
    if state is None:
        sys.exit(
            f"scripts/regions: no bed in {root} (scripts/regions up first, or set REGIONS_DIR)"
        )
    return state


def proxy_port(state, src, dst):
    return state["gateway_proxy"][src + ">" + dst]


def nats_conf(state, region):
    ports = state["region"][region]
    gateways = ",\n".join(
        f'    {{name: "{other}", url: "nats://127.0.0.1:{proxy_port(state, region, other)}"}}'
        for other in state["regions"]
        if other != region
    )
    store = os.path.join(state["dir"], region, "nats", "store")
    # One server per region: its own cluster (named like the region; a clustered JetStream
    # server needs a route, so it routes to itself) and a gateway to every other region
    # through the delay proxy of that link. A server's gateway INFO hands its own address to
    # the other side, which would then reconnect around the proxy: every server advertises
    # the proxy's refusing port instead, so the only way in stays the link's proxy.
    # max_file_store is what streams may reserve (kairos's launch stream alone asks 4 GiB,
    # and the first region holds five streams), not what they use.
    return f"""server_name: "nats-{region}"
listen: "127.0.0.1:{ports["nats"]}"
http: "127.0.0.1:{ports["monitor"]}"
jetstream {{
  store_dir: "{store}"
  max_memory_store: 128MB
  max_file_store: 32GB
}}
cluster {{
  name: "{region}"
  listen: "127.0.0.1:{ports["cluster"]}"
  routes: ["nats://127.0.0.1:{ports["cluster"]}"]
}}
gateway {{
  name: "{region}"
  listen: "127.0.0.1:{ports["gateway"]}"
  advertise: "127.0.0.1:{state["refuse_port"]}"
  gateways: [
{gateways}
  ]
}}
"""


def links(state, ha=None):
    result = []
    regions = state["regions"]
    for a in regions:
        for b in regions:
            if a != b:
                result.append(
                    {
                        "name": f"gw {a}>{b}",
                        "listen": state["gateway_proxy"][a + ">" + b],
                        "target": state["region"][b]["gateway"],
                        "src": a,
                        "dst": b,
                        "sniff": "gateway",
                    }
                )
    for a in regions:
        result.append(
            {
                "name": f"db {a}",
                "listen": state["region"][a]["db_proxy"],
                "target": ha and int(ha["HAPROXY_PORT"]),
                "src": a,
                "dst": "@pg-leader",
            }
        )
    r1, r2 = state["pg_regions"]
    pg = state["pg_links"]
    # pg1's address is used by pg2 (replication, base backup, rewind) and the other way round.
    result.append(
        {
            "name": "pg pg1",
            "listen": pg["pg1"],
            "target": ha and int(ha["PG1_PORT"]),
            "src": r2,
            "dst": r1,
        }
    )
    result.append(
        {
            "name": "pg pg2",
            "listen": pg["pg2"],
            "target": ha and int(ha["PG2_PORT"]),
            "src": r1,
            "dst": r2,
        }
    )
    result.append(
        {
            "name": "etcd pg1",
            "listen": pg["etcd1"],
            "target": ha and int(ha["ETCD_CLIENT"]),
            "src": r1,
            "dst": "@dcs",
        }
    )
    result.append(
        {
            "name": "etcd pg2",
            "listen": pg["etcd2"],
            "target": ha and int(ha["ETCD_CLIENT"]),
            "src": r2,
            "dst": "@dcs",
        }
    )
    members = []
    if ha:
        members = [
            {"name": "pg1", "region": r1, "rest": int(ha["REST1_PORT"])},
            {"name": "pg2", "region": r2, "rest": int(ha["REST2_PORT"])},
        ]
    return {"links": result, "pg_members": members, "refuse_port": state["refuse_port"]}


def read_ha_state(state):
    path = os.path.join(state["ha_dir"], "state")
    values = {}
    try:
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.strip().split("=", 1)
                    values[k] = v
    except OSError:
        return None
    needed = ["HAPROXY_PORT", "PG1_PORT", "PG2_PORT", "ETCD_CLIENT", "REST1_PORT", "REST2_PORT"]
    return values if all(k in values for k in needed) else None


def plan(root):
    env = os.environ
    regions = env["REGIONS"].split()
    instances = int(env["REGIONS_INSTANCES"])
    pg_regions = env["REGIONS_PG"].split()
    n = len(regions)
    # Where the first kairos instance starts, so where the streams without a region
    # (KAIROS_LAUNCH, _STATUS, _DLQ, _CANCEL) and their executor live: away from the
    # PostgreSQL members and from the region drills 1 and 2 take by default (the first
    # region without a member), so that each drill loses one thing at a time.
    free = [r for r in regions if r not in pg_regions]
    global_region = free[1] if len(free) >= 2 else regions[0]
    ports = iter(free_ports(n * (5 + instances) + n * (n - 1) + 4 + 1))
    state = {
        "dir": root,
        "regions": regions,
        "rtt_ms": int(env["REGIONS_RTT_MS"]),
        "instances": instances,
        "pg_regions": pg_regions,
        "global_region": global_region,
        "pg_strict": env.get("REGIONS_PG_STRICT", "0") == "1",
        "kairos_bin": env["KAIROS_BIN"],
        "region_support": env["REGION_SUPPORT"] == "1",
        "fallback_after_s": 10,
        "ha_dir": os.path.join(root, "ha"),
        "refuse_port": next(ports),
        "region": {},
        "gateway_proxy": {},
        "pg_links": {k: next(ports) for k in ("pg1", "pg2", "etcd1", "etcd2")},
    }
    for r in regions:
        state["region"][r] = {
            "nats": next(ports),
            "cluster": next(ports),
            "gateway": next(ports),
            "monitor": next(ports),
            "db_proxy": next(ports),
            "http": [next(ports) for _ in range(instances)],
        }
    for a in regions:
        for b in regions:
            if a != b:
                state["gateway_proxy"][a + ">" + b] = next(ports)
    write_json(os.path.join(root, "state.json"), state)
    for r in regions:
        os.makedirs(os.path.join(root, r, "nats", "store"), exist_ok=True)
        with open(os.path.join(root, r, "nats", "nats.conf"), "w") as f:
            f.write(nats_conf(state, r))
    write_json(os.path.join(root, "links.json"), links(state))
    write_json(os.path.join(root, "control.json"), {"gen": 1, "rtt_ms": state["rtt_ms"], "cut": []})
    # The bash side: one associative array per kind of port, keyed by region.
    lines = [
        f'REGIONS="{" ".join(regions)}"',
        f"INSTANCES={instances}",
        f'PG_REGIONS="{" ".join(pg_regions)}"',
        f"GLOBAL_REGION={global_region}",
        f"PG_STRICT={1 if state['pg_strict'] else 0}",
        f'KAIROS_BIN="{state["kairos_bin"]}"',
        f"REGION_SUPPORT={1 if state['region_support'] else 0}",
        f'HA_DIR="{state["ha_dir"]}"',
        'HA_LINK_PORTS="{pg1} {pg2} {etcd1} {etcd2}"'.format(**state["pg_links"]),
    ]
    for kind in ("nats", "monitor", "db_proxy"):
        pairs = " ".join(f"[{r}]={state['region'][r][kind]}" for r in regions)
        lines.append(f"declare -gA {kind.upper()}_PORT=({pairs})")
    pairs = " ".join(f'[{r}]="{" ".join(map(str, state["region"][r]["http"]))}"' for r in regions)
    lines.append(f"declare -gA HTTP_PORTS=({pairs})")
    with open(os.path.join(root, "state"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ha_links(root):
    state = load(root)
    ha = read_ha_state(state)
    if ha is None:
        sys.exit(1)
    write_json(os.path.join(root, "links.json"), links(state, ha))


def control(root, verb, arg):
    path = os.path.join(root, "control.json")
    current = read_json(path, {"gen": 0, "rtt_ms": 0, "cut": []})
    cut = set(current.get("cut", []))
    if verb == "cut":
        cut.add(arg)
    elif verb == "heal":
        cut.discard(arg)
    elif verb == "rtt":
        current["rtt_ms"] = int(arg)
    current["cut"] = sorted(cut)
    current["gen"] = int(current.get("gen", 0)) + 1
    write_json(path, current)
    deadline = time.time() + 10
    while time.time() < deadline:
        applied = read_json(os.path.join(root, "applied.json"), {})
        if applied.get("gen", -1) >= current["gen"]:
            return
        time.sleep(0.05)
    sys.exit("scripts/regions: the delay proxy did not take the change in 10 s (is it running?)")


def http_get(url, timeout=1.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, b""
    except Exception:  # noqa: BLE001
        return None, b""


def jsz(state, region):
    code, body = http_get(f"http://127.0.0.1:{state['region'][region]['monitor']}/jsz", 1.0)
    if code != 200:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def wait_nats(root, seconds):
    state = load(root)
    deadline = time.time() + seconds
    want = len(state["regions"])
    last = "no answer"
    while time.time() < deadline:
        infos = {r: jsz(state, r) for r in state["regions"]}
        if all(infos.values()):
            meta = infos[state["regions"][0]].get("meta_cluster") or {}
            if meta.get("leader") and meta.get("cluster_size", 0) >= want:
                return
            last = f"meta group: {meta}"
        else:
            last = "not answering: " + " ".join(r for r, i in infos.items() if not i)
        time.sleep(0.5)
    sys.exit(f"scripts/regions: the NATS supercluster is not ready after {seconds}s ({last})")


def pid_alive(path):
    try:
        with open(path) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def ha_status(state):
    try:
        out = subprocess.run(
            [os.path.join(REPO, "scripts", "ha"), "status"],
            env=dict(os.environ, HA_DIR=state["ha_dir"]),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return json.loads(out)
    except Exception:  # noqa: BLE001
        return {"leader": None, "members": []}


def status(root):
    state = load(root)
    control_now = read_json(os.path.join(root, "control.json"), {})
    applied = read_json(os.path.join(root, "applied.json"), {})
    cut = set(control_now.get("cut", []))
    pg = ha_status(state)
    member_region = dict(zip(("pg1", "pg2"), state["pg_regions"], strict=True))
    regions = {}
    for r in state["regions"]:
        ports = state["region"][r]
        code, _ = http_get(f"http://127.0.0.1:{ports['monitor']}/healthz")
        kairos = []
        for i, port in enumerate(ports["http"], 1):
            health, _ = http_get(f"http://127.0.0.1:{port}/healthz", 2.0)
            ready, _ = http_get(f"http://127.0.0.1:{port}/readyz", 2.0)
            kairos.append(
                {
                    "url": f"http://127.0.0.1:{port}",
                    "pid": pid_alive(os.path.join(root, "pids", f"kairos-{r}-{i}.pid")),
                    "healthy": health == 200,
                    "ready": ready == 200,
                }
            )
        members = [m for m, region in member_region.items() if region == r]
        regions[r] = {
            "nats": {
                "url": f"nats://127.0.0.1:{ports['nats']}",
                "pid": pid_alive(os.path.join(root, "pids", f"nats-{r}.pid")),
                "healthy": code == 200,
            },
            "kairos": kairos,
            "executor": {
                "pid": pid_alive(os.path.join(root, "pids", f"executor-{r}.pid")),
                "received": count_lines(os.path.join(root, "records", f"{r}.jsonl")),
            },
            "pg_member": members[0] if members else None,
            "cut": r in cut,
            "killed": os.path.exists(os.path.join(root, "killed", r)),
        }
    leader = pg.get("leader")
    print(
        json.dumps(
            {
                "dir": root,
                "rtt_ms": control_now.get("rtt_ms"),
                "kairos_bin": state["kairos_bin"],
                "region_support": state["region_support"],
                "streams_without_region_in": state.get("global_region"),
                "regions": regions,
                "postgres": {
                    "leader": leader,
                    "leader_region": member_region.get(leader),
                    "proxy_sees_leader_in": applied.get("pg_leader_region"),
                    "members": [
                        dict(m, region=member_region.get(m["name"])) for m in pg.get("members", [])
                    ],
                },
            },
            indent=1,
        )
    )


def main():
    verb, root = sys.argv[1], sys.argv[2]
    if verb == "plan":
        plan(root)
    elif verb == "ha-links":
        ha_links(root)
    elif verb == "control":
        control(root, sys.argv[3], sys.argv[4])
    elif verb == "wait-nats":
        wait_nats(root, float(sys.argv[3]) if len(sys.argv) > 3 else 60)
    elif verb == "status":
        status(root)
    else:
        sys.exit(f"bed.py: unknown verb {verb}")


if __name__ == "__main__":
    main()
