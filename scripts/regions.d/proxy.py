#!/usr/bin/env python3
"""The delay proxy of scripts/regions: one asyncio process, many TCP listeners on 127.0.0.1.

Each listener is a *link* from one region to another: every byte read on either side is
written to the other side RTT/2 later, in order. A link crossing into or out of a region
that is cut forwards nothing (connections stay open, nothing is read, nothing is written,
no RST) until the region is healed; then what was held goes on, in order.

    proxy.py DIR

DIR/links.json (re-read when it changes) lists the links:
    {"links": [{"name", "listen", "target", "src", "dst"}, ...],
     "pg_members": [{"name", "region", "rest"}, ...], "refuse_port": PORT}
`target` may be null until known (connections then wait for it). A link with "sniff":
"gateway" takes each connection's source region from the `gateway` of the connecting
nats-server's CONNECT (servers gossip gateway addresses, so one may come in through a
listener meant for another region); before that line only the far end's cut counts. `dst`
"@pg-leader" is the region of PostgreSQL's current primary (Patroni's REST `GET /primary`
on each member, polled every 500 ms): no delay from that region itself, RTT/2 from the
others, cut when either end is. `dst` "@dcs" (etcd) stands in no region: never cut itself.

DIR/control.json (polled every 100 ms) says {"gen", "rtt_ms", "cut": [regions]}; once a
generation is in force the proxy writes DIR/applied.json {"gen", "rtt_ms", "cut",
"pg_leader_region", "connections": {link or "gw SRC>DST": open connections}}.
"""

import asyncio
import collections
import json
import os
import socket
import sys
import urllib.request

from state_files import read_json, write_json

POLL_S = 0.1
LEADER_POLL_S = 0.5
CHUNK = 65536
# Bytes held per direction of a connection before reading stops (back-pressure).
HELD_MAX = 8 * 1024 * 1024


class State:
    def __init__(self, root):
        self.root = root
        self.rtt_ms = 0
        self.cut = set()
        self.gen = -1
        self.leader_region = None
        self.links = {}  # name -> dict
        self.servers = {}  # name -> asyncio.Server
        self.members = []
        self.connections = {}  # name -> count
        self.open = set()  # Conn
        self.changed = asyncio.Event()
        self.links_mtime = None
        self.control_mtime = None
        self.refusing = None

    # The region at the far end of a link, now.
    def dst_of(self, link):
        dst = link["dst"]
        if dst == "@pg-leader":
            return self.leader_region
        return dst

    def is_cut(self, link):
        src, dst = link["src"], self.dst_of(link)
        if src == dst:
            return False
        if src is None:
            return dst in self.cut
        return src in self.cut or dst in self.cut

    def delay_s(self, link):
        src, dst = link["src"], self.dst_of(link)
        if src == dst:
            return 0.0
        return self.rtt_ms / 2000.0

    async def wait_open(self, link):
        while self.is_cut(link):
            self.changed.clear()
            if not self.is_cut(link):
                break
            await self.changed.wait()

    def notify(self):
        self.changed.set()
        for conn in list(self.open):
            conn.refresh()

    def count(self, key, by):
        self.connections[key] = self.connections.get(key, 0) + by




def gateway_of(first_line):
    """The gateway (region) named by a nats-server's CONNECT line, or None."""
    if not first_line.startswith(b"CONNECT "):
        return None
    try:
        return json.loads(first_line[len(b"CONNECT ") :]).get("gateway") or None
    except ValueError:
        return None


EOF_MARK = object()
UP, DOWN = 0, 1  # client -> upstream, upstream -> client


class Conn:
    """One proxied connection: two directions, each a queue of (due, bytes) written when due
    (loop.call_at), everything held while the link is cut. Reading pauses while cut, while
    HELD_MAX bytes wait in a direction, or while the receiving side's buffer is full."""

    def __init__(self, state, name, link):
        self.state = state
        self.loop = asyncio.get_running_loop()
        # This connection's own view of the link. A gateway link learns its source from the
        # connecting server's CONNECT: servers gossip the gateway addresses they use, so a
        # server may come in through another region's listener. Until then only the far end
        # counts.
        self.link = {"src": link["src"], "dst": link["dst"]}
        self.sniffing = link.get("sniff") == "gateway"
        self.first = b""
        self.counted = []
        if self.sniffing:
            self.link["src"] = None
        else:
            self.counted.append(name)
            state.count(name, 1)
        self.name = name
        self.sides = [None, None]  # transports: client, upstream
        self.queues = [collections.deque(), collections.deque()]
        self.held = [0, 0]
        self.timers = [None, None]
        self.write_paused = [False, False]  # the receiving side of a direction is full
        self.reading = [True, True]  # per transport
        self.lost = [False, False]  # per transport: it was connected and is gone
        self.eof_sent = [False, False]  # per direction
        self.done = False
        state.open.add(self)

    # transports: 0 = client (source of UP), 1 = upstream (source of DOWN)
    def refresh(self):
        cut = self.state.is_cut(self.link)
        connected = self.sides[1] is not None or self.lost[1]
        for side in (0, 1):
            transport = self.sides[side]
            if transport is None or transport.is_closing():
                continue
            direction = side  # what this side reads goes in this direction
            want = (
                connected
                and not cut
                and self.held[direction] < HELD_MAX
                and not self.write_paused[direction]
            )
            if want and not self.reading[side]:
                transport.resume_reading()
                self.reading[side] = True
            elif not want and self.reading[side]:
                transport.pause_reading()
                self.reading[side] = False
        if not cut:
            self.schedule(UP)
            self.schedule(DOWN)

    def received(self, direction, data):
        if self.sniffing and direction == UP:
            self.first += data
            if b"\r\n" in self.first or len(self.first) > 16384:
                region = gateway_of(self.first.split(b"\r\n", 1)[0])
                self.sniffing, self.first = False, b""
                if region is not None:
                    self.link["src"] = region
                    key = f"gw {region}>{self.link['dst']}"
                    self.counted.append(key)
                    self.state.count(key, 1)
                    self.refresh()
        self.queues[direction].append((self.loop.time() + self.state.delay_s(self.link), data))
        self.held[direction] += len(data)
        if self.held[direction] >= HELD_MAX:
            self.refresh()
        self.schedule(direction)

    def ended(self, direction):
        """The source of `direction` sent EOF or went away: pass that on once due."""
        if self.eof_sent[direction] or any(d is EOF_MARK for _, d in self.queues[direction]):
            return
        self.queues[direction].append((self.loop.time() + self.state.delay_s(self.link), EOF_MARK))
        self.schedule(direction)

    def schedule(self, direction):
        queue = self.queues[direction]
        if self.timers[direction] is not None or not queue or self.state.is_cut(self.link):
            return
        self.timers[direction] = self.loop.call_at(queue[0][0], self.flush, direction)

    def flush(self, direction):
        self.timers[direction] = None
        if self.state.is_cut(self.link) or self.done:
            return
        queue = self.queues[direction]
        target = self.sides[1 - direction]
        if target is None and not self.lost[1 - direction]:
            return  # the upstream is not connected yet: it flushes once it is
        now = self.loop.time()
        parts, size, eof = [], 0, False
        while queue and queue[0][0] <= now:
            _, data = queue.popleft()
            if data is EOF_MARK:
                eof = True
                break
            parts.append(data)
            size += len(data)
        if parts and target is not None and not target.is_closing():
            target.write(parts[0] if len(parts) == 1 else b"".join(parts))
        self.held[direction] -= size
        if eof:
            self.finish_direction(direction)
            return
        if self.held[direction] < HELD_MAX:
            self.refresh_one(direction)
        self.schedule(direction)

    def refresh_one(self, direction):
        transport = self.sides[direction]
        if transport is None or transport.is_closing() or self.reading[direction]:
            return
        if not self.state.is_cut(self.link) and not self.write_paused[direction]:
            transport.resume_reading()
            self.reading[direction] = True

    def finish_direction(self, direction):
        """Everything of `direction` is delivered and its source ended: end the target's
        writing too; once both directions are ended, the connection is done."""
        self.eof_sent[direction] = True
        target = self.sides[1 - direction]
        if all(self.eof_sent) or target is None or target.is_closing():
            self.close()
            return
        try:
            if target.can_write_eof():
                target.write_eof()
                return
        except (OSError, RuntimeError):
            pass
        self.close()

    def close(self):
        if self.done:
            return
        self.done = True
        for timer in self.timers:
            if timer is not None:
                timer.cancel()
        for transport in self.sides:
            if transport is not None:
                transport.close()
        for key in self.counted:
            self.state.count(key, -1)
        self.state.open.discard(self)


class Side(asyncio.Protocol):
    """One end of a Conn: side 0 the accepted client, side 1 the upstream."""

    def __init__(self, conn, side):
        self.conn = conn
        self.side = side

    def connection_made(self, transport):
        self.conn.sides[self.side] = transport
        if self.side == 0:
            # Nothing is read from the client before the upstream answers.
            transport.pause_reading()
            self.conn.reading[0] = False
        else:
            self.conn.refresh()

    def data_received(self, data):
        self.conn.received(self.side, data)

    def eof_received(self):
        self.conn.ended(self.side)
        return True  # the other direction may still carry data

    def connection_lost(self, exc):
        conn = self.conn
        conn.sides[self.side] = None
        conn.lost[self.side] = True
        if conn.done:
            return
        if conn.lost[1 - self.side]:
            conn.close()
            return
        # What this side sent still goes on; what goes to it has nowhere to go.
        conn.queues[1 - self.side].clear()
        conn.held[1 - self.side] = 0
        conn.eof_sent[1 - self.side] = True
        conn.ended(self.side)

    def pause_writing(self):
        # This side's write buffer is full: stop reading what goes to it.
        self.conn.write_paused[1 - self.side] = True
        self.conn.refresh()

    def resume_writing(self):
        self.conn.write_paused[1 - self.side] = False
        self.conn.refresh()


async def connect_upstream(state, conn):
    # A connection made while the link is cut waits, accepted, until it is healed; one made
    # before the target is known waits for it.
    await state.wait_open(conn.link)
    while state.links.get(conn.name, {}).get("target") is None:
        await asyncio.sleep(POLL_S)
    target = state.links[conn.name]["target"]
    try:
        await conn.loop.create_connection(lambda: Side(conn, 1), "127.0.0.1", target)
    except OSError:
        conn.close()


def accept(state, name):
    def factory():
        conn = Conn(state, name, state.links[name])
        side = Side(conn, 0)
        asyncio.ensure_future(connect_upstream(state, conn))
        return side

    return factory


async def load_links(state):
    path = os.path.join(state.root, "links.json")
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return
    if mtime == state.links_mtime:
        return
    config = read_json(path)
    if config is None:
        return
    state.links_mtime = mtime
    state.members = config.get("pg_members", [])
    refuse = config.get("refuse_port")
    if refuse and state.refusing is None:
        # Bound, never listening: a connection to it is refused at once (the address every
        # nats-server advertises for its gateway, so that nobody goes around a proxy).
        state.refusing = socket.socket()
        state.refusing.bind(("127.0.0.1", refuse))
    for link in config.get("links", []):
        name = link["name"]
        known = state.links.get(name)
        if known is not None:
            known.update(link)
            continue
        state.links[name] = dict(link)
        state.servers[name] = await asyncio.get_running_loop().create_server(
            accept(state, name), "127.0.0.1", link["listen"], reuse_address=True
        )
    state.notify()


def load_control(state):
    path = os.path.join(state.root, "control.json")
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return False
    if mtime == state.control_mtime:
        return False
    control = read_json(path)
    if control is None:
        return False
    state.control_mtime = mtime
    state.rtt_ms = int(control.get("rtt_ms", 0))
    state.cut = set(control.get("cut", []))
    state.gen = int(control.get("gen", 0))
    state.notify()
    return True


def write_applied(state):
    write_json(
        os.path.join(state.root, "applied.json"),
        {
            "gen": state.gen,
            "rtt_ms": state.rtt_ms,
            "cut": sorted(state.cut),
            "pg_leader_region": state.leader_region,
            "connections": dict(state.connections),
        },
    )


def primary_of(members):
    for member in members:
        try:
            url = f"http://127.0.0.1:{member['rest']}/primary"
            with urllib.request.urlopen(url, timeout=0.3) as answer:
                if answer.status == 200:
                    return member["region"]
        except Exception:  # noqa: BLE001 - any failure: not the primary
            continue
    return None


async def watch_leader(state):
    loop = asyncio.get_running_loop()
    while True:
        if state.members:
            region = await loop.run_in_executor(None, primary_of, list(state.members))
            # While no member answers (a failover), keep the last known one.
            if region is not None and region != state.leader_region:
                state.leader_region = region
                state.notify()
        await asyncio.sleep(LEADER_POLL_S)


async def main(root):
    state = State(root)
    asyncio.ensure_future(watch_leader(state))
    ticks = 0
    while True:
        await load_links(state)
        changed = load_control(state)
        ticks += 1
        if changed or ticks % 10 == 0:
            write_applied(state)
        await asyncio.sleep(POLL_S)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
