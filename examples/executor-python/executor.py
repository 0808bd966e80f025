#!/usr/bin/env python3
"""A minimal kairos executor in Python, written only from kairos's schemas/.

It pulls launch messages (schemas/launch.schema.json) from the KAIROS_LAUNCH stream with a
durable consumer, reports STARTED, runs the DAG's nodes (schemas/dag.schema.json) in
dependency order, reports SUCCESS or FAILED (schemas/status.schema.json), then acknowledges.
Status goes over HTTP (POST /runs/{key}/status) with --kairos-url, else on the NATS subject
<prefix>.status.<idempotency_key>.

    pip install -r requirements.txt
    python3 executor.py --kairos-url http://127.0.0.1:8080
"""

import argparse
import asyncio
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


async def handle(args, js, launch):
    key = launch["idempotency_key"]
    if not await report(args, js, key, {"status": "STARTED", "executor_id": args.executor_id}):
        print(f"executor: {key} is owned by another executor; not running it")
        return
    status, error = "SUCCESS", None
    try:
        for node_id in dependency_order(launch["dag"]):
            node = next(n for n in launch["dag"]["nodes"] if n["id"] == node_id)
            print(f"executor: {launch['workflow_id']} {launch['scheduled_for']} node {node_id}")
            await asyncio.sleep(node.get("sleep_ms", 0) / 1000)
            if node.get("fail"):
                raise RuntimeError(f"node {node_id} failed")
    except Exception as err:  # the run failed: say why
        status, error = "FAILED", str(err)
    body = {"status": status, "executor_id": args.executor_id}
    if error:
        body["error"] = error
    await report(args, js, key, body)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--stream", default="KAIROS_LAUNCH")
    parser.add_argument("--subject-prefix", default="kairos")
    parser.add_argument("--durable", default="python-executor")
    parser.add_argument("--executor-id", default="python-executor-1")
    parser.add_argument("--kairos-url", help="report status over HTTP to this kairos")
    parser.add_argument("--token", help="bearer token (role executor) for HTTP reports")
    parser.add_argument("--max-runs", type=int, default=0, help="exit after N runs (0: never)")
    args = parser.parse_args()

    nc = await nats.connect(args.nats_url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(f"{args.subject_prefix}.launch.>", durable=args.durable,
                                  stream=args.stream)
    handled = 0
    while args.max_runs == 0 or handled < args.max_runs:
        try:
            messages = await sub.fetch(10, timeout=1)
        except nats.errors.TimeoutError:
            continue
        for message in messages:
            try:
                launch = json.loads(message.data)
            except ValueError:
                print("executor: not a launch message; terminating it", file=sys.stderr)
                await message.term()
                continue
            await handle(args, js, launch)
            await message.ack()
            handled += 1
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
