#!/usr/bin/env python3
"""A minimal kairos executor in Python, written only from kairos's schemas/.

It pulls launch messages (schemas/launch.schema.json) from the KAIROS_LAUNCH stream with a
durable consumer, reports STARTED, runs the DAG's nodes (schemas/dag.schema.json) in
dependency order while reporting HEARTBEAT every --heartbeat-every seconds, reports SUCCESS
or FAILED (schemas/status.schema.json), then acknowledges. Every report echoes the launch
message's attempt. Status goes over HTTP (POST /runs/{key}/status) with --kairos-url, else on
the NATS subject <prefix>.status.<idempotency_key>.

Cancel requests (schemas/cancel.schema.json) arrive on <prefix>.cancel.<workflow_id>; the
executor listens to <prefix>.cancel.> with a plain subscription, stops the run the request
names (same idempotency_key and attempt) and reports CANCELLED. A cancel for a run it does
not have yet is remembered, so a launch that arrives after its cancel is reported CANCELLED
without running.

Demo node fields: sleep_ms (how long the node runs), fail: true (it fails),
fail_until_attempt: n (it fails while the attempt is below n) and fatal: true (it fails and
the report says "retryable": false, so kairos dead-letters the run at once).

    pip install -r requirements.txt
    python3 executor.py --kairos-url http://127.0.0.1:8080
"""

import argparse
import asyncio
import contextlib
import json
import sys
import urllib.error
import urllib.request

import nats
import nats.errors


def dependency_order(dag):
    """Node ids, each after the nodes it depends on (Kahn; ties keep listing order)."""
    nodes = dag["nodes"]
    ids = [node["id"] for node in nodes]
    waiting = {node["id"]: set(node.get("depends_on", [])) for node in nodes}
    order = []
    while len(order) < len(ids):
        ready = [i for i in ids if i not in order and not waiting[i] - set(order)]
        if not ready:
            raise ValueError("dag has a cycle or an unknown dependency")
        order.append(ready[0])
    return order


async def report(args, js, key, body):
    """Sends one status; returns False when another executor owns the run (HTTP 409)."""
    if args.kairos_url:
        request = urllib.request.Request(
            f"{args.kairos_url}/runs/{key}/status",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json",
                     **({"authorization": f"Bearer {args.token}"} if args.token else {})},
            method="POST",
        )
        try:
            await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
        except urllib.error.HTTPError as err:
            if err.code == 409:
                return False
            raise
        return True
    await js.publish(f"{args.subject_prefix}.status.{key}",
                     json.dumps({**body, "idempotency_key": key}).encode())
    return True


class NodeFailed(Exception):
    """A node failed; retryable False means another attempt cannot help."""

    def __init__(self, message, retryable=True):
        super().__init__(message)
        self.retryable = retryable


def run_node_checks(node_id, node, attempt):
    """Raises NodeFailed as the demo fields fatal, fail and fail_until_attempt say."""
    if node.get("fatal"):
        raise NodeFailed(f"node {node_id} failed fatally", retryable=False)
    if node.get("fail"):
        raise NodeFailed(f"node {node_id} failed")
    until = node.get("fail_until_attempt")
    if until is not None and attempt < until:
        raise NodeFailed(f"node {node_id} failed on attempt {attempt} "
                         f"(fails until attempt {until})")


async def run_nodes(launch):
    attempt = launch["attempt"]
    try:
        order = dependency_order(launch["dag"])
    except (KeyError, ValueError) as err:
        # The DAG is the same in every attempt: one that cannot be ordered never will be.
        raise NodeFailed(str(err), retryable=False) from err
    for node_id in order:
        node = next(n for n in launch["dag"]["nodes"] if n["id"] == node_id)
        print(f"executor: {launch['workflow_id']} {launch['scheduled_for']} "
              f"attempt {attempt} node {node_id}")
        await asyncio.sleep(node.get("sleep_ms", 0) / 1000)
        run_node_checks(node_id, node, attempt)


async def heartbeats(args, js, key, attempt):
    """Reports HEARTBEAT every --heartbeat-every seconds until cancelled. A lost one is only
    logged: if none gets through, kairos times the attempt out, which is their purpose."""
    while True:
        await asyncio.sleep(args.heartbeat_every)
        body = {"status": "HEARTBEAT", "executor_id": args.executor_id, "attempt": attempt}
        try:
            if not await report(args, js, key, body):
                print(f"executor: kairos refused a heartbeat for {key} (attempt {attempt})",
                      file=sys.stderr)
        except Exception as err:  # noqa: BLE001 - any transport failure; keep working
            print(f"executor: could not report a heartbeat for {key}: {err}", file=sys.stderr)


class Cancels:
    """The runs this executor is working on and the cancels it heard, by (key, attempt).
    Every executor hears every cancel, and most name runs another executor took, so only
    the newest MAX_HEARD are remembered."""

    MAX_HEARD = 10_000

    def __init__(self):
        self.running = {}
        self.heard = {}  # an ordered set: (key, attempt) -> None

    def hear(self, request):
        run = (request["idempotency_key"], request["attempt"])
        self.heard[run] = None
        while len(self.heard) > self.MAX_HEARD:
            del self.heard[next(iter(self.heard))]
        task = self.running.get(run)
        if task is not None:
            task.cancel()

    async def on_message(self, message):
        try:
            request = json.loads(message.data)
            print(f"executor: cancel of {request['idempotency_key']} attempt "
                  f"{request['attempt']} ({request.get('reason') or 'no reason'})")
            self.hear(request)
        except (TypeError, ValueError, KeyError):
            print("executor: not a cancel request; ignored", file=sys.stderr)


async def handle(args, js, launch, cancels):
    key, attempt = launch["idempotency_key"], launch["attempt"]
    body = {"status": "SUCCESS", "executor_id": args.executor_id, "attempt": attempt}
    if (key, attempt) in cancels.heard:
        print(f"executor: {key} was cancelled before it started; not running it")
        cancels.heard.pop((key, attempt), None)
        await report(args, js, key, {**body, "status": "CANCELLED"})
        return
    started = {"status": "STARTED", "executor_id": args.executor_id, "attempt": attempt}
    if not await report(args, js, key, started):
        print(f"executor: {key} is owned by another executor; not running it")
        return
    beating = asyncio.create_task(heartbeats(args, js, key, attempt))
    work = asyncio.create_task(run_nodes(launch))
    cancels.running[(key, attempt)] = work
    try:
        await work
    except asyncio.CancelledError:
        if (key, attempt) not in cancels.heard:
            raise  # this executor is shutting down, not a cancel request
        print(f"executor: {key} attempt {attempt} stopped by a cancel")
        body["status"] = "CANCELLED"
    except NodeFailed as err:
        body.update(status="FAILED", error=str(err))
        if not err.retryable:
            body["retryable"] = False
    except Exception as err:  # noqa: BLE001 - the run failed: say why
        body.update(status="FAILED", error=str(err))
    finally:
        cancels.running.pop((key, attempt), None)
        cancels.heard.pop((key, attempt), None)
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    await report(args, js, key, body)


def positive_seconds(text):
    seconds = float(text)
    if not seconds > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return seconds


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--stream", default="KAIROS_LAUNCH")
    parser.add_argument("--subject-prefix", default="kairos")
    parser.add_argument("--durable", default="python-executor")
    parser.add_argument("--executor-id", default="python-executor-1")
    parser.add_argument("--kairos-url", help="report status over HTTP to this kairos")
    parser.add_argument("--token", help="bearer token (role executor) for HTTP reports")
    parser.add_argument("--heartbeat-every", type=positive_seconds, default=10.0,
                        help="seconds between HEARTBEAT reports while a run works")
    parser.add_argument("--max-runs", type=int, default=0, help="exit after N runs (0: never)")
    args = parser.parse_args()

    nc = await nats.connect(args.nats_url)
    js = nc.jetstream()
    cancels = Cancels()
    await nc.subscribe(f"{args.subject_prefix}.cancel.>", cb=cancels.on_message)
    await nc.flush()
    sub = await js.pull_subscribe(f"{args.subject_prefix}.launch.>", durable=args.durable,
                                  stream=args.stream)
    handled = 0
    while args.max_runs == 0 or handled < args.max_runs:
        try:
            messages = await sub.fetch(10, timeout=1)
        # nats-py raises its own TimeoutError, or asyncio's when a fetch of several messages
        # runs out of time between two of them: both mean "nothing more right now".
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            continue
        for message in messages:
            try:
                launch = json.loads(message.data)
                if not all(field in launch for field in ("idempotency_key", "attempt", "dag")):
                    raise ValueError("a launch message field is missing")
            except (TypeError, ValueError):
                print("executor: not a launch message; terminating it", file=sys.stderr)
                await message.term()
                continue
            await handle(args, js, launch, cancels)
            await message.ack()
            handled += 1
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
