#!/usr/bin/env python3
"""A minimal kairos executor in Python, written only from kairos's schemas/.

It pulls launch messages (schemas/launch.schema.json) from the KAIROS_LAUNCH stream with a
durable consumer and works on up to --concurrency of them at once, each in its own asyncio
task: it reports STARTED, runs the DAG's nodes (schemas/dag.schema.json) in dependency order
while reporting HEARTBEAT every --heartbeat-every seconds, reports SUCCESS or FAILED
(schemas/status.schema.json), then acknowledges the message. Heartbeats and the end report
carry the run's output so far (a line per node, and the failure), which kairos keeps per
attempt and shows on the run page and in `kairos runs logs`. While a run works, the message
gets an in-progress ack every third of the consumer's ack wait, so JetStream does not
redeliver it to run it a second time. Every report echoes the launch message's attempt.
Status goes over HTTP (POST /runs/{key}/status) with --kairos-url, else on the NATS subject
the launch message names (status_subject).

Over HTTP kairos answers STARTED: a 409 (another executor owns the run) or a run that is not
this attempt in STARTED (it already finished, say) means the run is not executed. Over NATS
there is no answer to read: the first executor to report STARTED owns the run at kairos, and
a later one's reports change nothing.

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
from nats.js.api import ConsumerConfig, DeliverPolicy


def log(text, error=False):
    print(f"executor: {text}", file=sys.stderr if error else sys.stdout, flush=True)


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


def post(url, token, body):
    """POSTs one status; returns kairos's answer (the run), or None for a 409."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json",
                 **({"authorization": f"Bearer {token}"} if token else {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        if err.code == 409:
            return None
        raise


async def report(args, js, launch, body):
    """Sends one status about the run of `launch`. Over HTTP returns the run as kairos has it
    after the report, or None when kairos refused it (409: another executor owns the run, or
    it takes no report now). Over NATS, on the subject the launch names, there is no answer:
    returns {}."""
    key = launch["idempotency_key"]
    if args.kairos_url:
        return await asyncio.to_thread(post, f"{args.kairos_url}/runs/{key}/status",
                                       args.token, body)
    subject = launch.get("status_subject") or f"{args.subject_prefix}.status.{key}"
    await js.publish(subject, json.dumps({**body, "idempotency_key": key}).encode())
    return {}


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


async def run_nodes(launch, output):
    """Runs the nodes in dependency order. `output` (a list of lines) gets a line per node as
    it begins; heartbeats and the end report send it as the run's output."""
    attempt = launch["attempt"]
    try:
        order = dependency_order(launch["dag"])
    except (KeyError, ValueError) as err:
        # The DAG is the same in every attempt: one that cannot be ordered never will be.
        raise NodeFailed(str(err), retryable=False) from err
    for node_id in order:
        node = next(n for n in launch["dag"]["nodes"] if n["id"] == node_id)
        action = node.get("action") or "no action"
        output.append(f"node {node_id} ({action})")
        log(f"{launch['workflow_id']} {launch['scheduled_for']} attempt {attempt} "
            f"node {node_id} ({action})")
        await asyncio.sleep(node.get("sleep_ms", 0) / 1000)
        run_node_checks(node_id, node, attempt)


async def every(seconds, action, what):
    """Calls action() every `seconds` until cancelled. A failure is only logged: the next
    call may get through."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await action()
        except Exception as err:  # noqa: BLE001 - any transport failure; keep working
            log(f"could not {what}: {err}", error=True)


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
            log(f"cancel of {request['idempotency_key']} attempt {request['attempt']} "
                f"({request.get('reason') or 'no reason'})")
            self.hear(request)
        except (TypeError, ValueError, KeyError):
            log("not a cancel request; ignored", error=True)


async def handle(args, js, launch, cancels):
    """Runs one launch. Returns True when its message may be acknowledged (the run ended, or
    it is not this executor's to run), False to leave it for redelivery."""
    key, attempt = launch["idempotency_key"], launch["attempt"]
    body = {"status": "SUCCESS", "executor_id": args.executor_id, "attempt": attempt}
    if (key, attempt) in cancels.heard:
        log(f"{key} was cancelled before it started; not running it")
        cancels.heard.pop((key, attempt), None)
        await report(args, js, launch, {**body, "status": "CANCELLED"})
        return True
    try:
        answer = await report(args, js, launch, {**body, "status": "STARTED"})
    except Exception as err:  # noqa: BLE001 - without STARTED on record we cannot claim it
        log(f"could not report STARTED for {key}: {err}; left for redelivery", error=True)
        return False
    if answer is None:
        log(f"{key} is owned by another executor; not running it")
        return True
    if answer and (answer.get("status"), answer.get("attempt")) != ("STARTED", attempt):
        log(f"{key} is {answer.get('status')} at attempt {answer.get('attempt')}; "
            f"not running attempt {attempt}")
        if (answer.get("status"), answer.get("attempt")) == ("CANCELLING", attempt):
            await report(args, js, launch, {**body, "status": "CANCELLED"})
        return True

    output = []

    def output_text():
        return "".join(f"{line}\n" for line in output)

    async def heartbeat():
        beat = {**body, "status": "HEARTBEAT", "output": output_text()}
        if await report(args, js, launch, beat) is None:
            log(f"kairos refused a heartbeat for {key} (attempt {attempt})", error=True)

    # A lost heartbeat is only logged: if none gets through, kairos times the attempt out,
    # which is what heartbeats are for.
    beating = asyncio.create_task(every(args.heartbeat_every, heartbeat,
                                        f"report a heartbeat for {key}"))
    work = asyncio.create_task(run_nodes(launch, output))
    cancels.running[(key, attempt)] = work
    try:
        await work
    except asyncio.CancelledError:
        if (key, attempt) not in cancels.heard:
            raise  # this executor is shutting down, not a cancel request
        log(f"{key} attempt {attempt} stopped by a cancel")
        body["status"] = "CANCELLED"
    except NodeFailed as err:
        body.update(status="FAILED", error=str(err))
        output.append(str(err))
        if not err.retryable:
            body["retryable"] = False
    except Exception as err:  # noqa: BLE001 - the run failed: say why
        body.update(status="FAILED", error=str(err))
        output.append(str(err))
    finally:
        cancels.running.pop((key, attempt), None)
        cancels.heard.pop((key, attempt), None)
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    await report(args, js, launch, {**body, "output": output_text()})
    return True


async def take(args, js, message, cancels, progress_every):
    """One launch message, from delivery to acknowledgement. While its run works the message
    gets an in-progress ack every progress_every seconds: each restarts the consumer's ack
    wait, so JetStream does not redeliver a message whose run takes longer than that."""
    try:
        launch = json.loads(message.data)
        if not all(field in launch for field in ("idempotency_key", "attempt", "dag")):
            raise ValueError("a launch message field is missing")
    except (TypeError, ValueError):
        log("not a launch message; terminating it", error=True)
        await message.term()
        return
    progress = asyncio.create_task(every(progress_every, message.in_progress,
                                         "send an in-progress ack"))
    try:
        done = await handle(args, js, launch, cancels)
    except Exception as err:  # noqa: BLE001 - a lost final report: kairos times the run out
        log(f"could not report the end of {launch['idempotency_key']}: {err}", error=True)
        done = True
    finally:
        progress.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await progress
    if done:
        await message.ack()


def positive(kind):
    def parse(text):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError("must be above 0")
        return value
    return parse


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--stream", default="KAIROS_LAUNCH")
    parser.add_argument("--subject-prefix", default="kairos")
    parser.add_argument("--durable", default="python-executor")
    parser.add_argument("--executor-id", default="python-executor-1")
    parser.add_argument("--kairos-url", help="report status over HTTP to this kairos")
    parser.add_argument("--token", help="bearer token (role executor) for HTTP reports")
    parser.add_argument("--concurrency", type=positive(int), default=4,
                        help="runs worked on at once (default 4)")
    parser.add_argument("--heartbeat-every", type=positive(float), default=10.0,
                        help="seconds between HEARTBEAT reports while a run works")
    parser.add_argument("--ack-wait-s", type=positive(float), default=30.0,
                        help="the durable's ack wait, set when this executor creates it "
                             "(default 30)")
    parser.add_argument("--deliver-policy", choices=["new", "all"], default="new",
                        help="where a durable this executor creates starts: new (launches "
                             "published from now on, the default) or all (the whole stream)")
    parser.add_argument("--max-runs", type=int, default=0,
                        help="exit after taking N launch messages (0: never)")
    args = parser.parse_args()

    nc = await nats.connect(args.nats_url)
    js = nc.jetstream()
    cancels = Cancels()
    await nc.subscribe(f"{args.subject_prefix}.cancel.>", cb=cancels.on_message)
    await nc.flush()
    # The config applies only when the durable does not exist yet; an existing one keeps
    # its own, so the in-progress interval comes from the consumer as it is.
    config = ConsumerConfig(deliver_policy=DeliverPolicy(args.deliver_policy),
                            ack_wait=args.ack_wait_s)
    sub = await js.pull_subscribe(f"{args.subject_prefix}.launch.>", durable=args.durable,
                                  stream=args.stream, config=config)
    info = await sub.consumer_info()
    log(f"durable {args.durable}: deliver policy {info.config.deliver_policy}, "
        f"ack wait {info.config.ack_wait} s, {args.concurrency} runs at once")

    # A message is fetched only when a slot is free, so none waits here, unworked, while
    # its ack wait runs out.
    slots = asyncio.Semaphore(args.concurrency)
    working = set()
    taken = 0
    while args.max_runs == 0 or taken < args.max_runs:
        await slots.acquire()
        try:
            [message] = await sub.fetch(1, timeout=1)
        except (nats.errors.TimeoutError, asyncio.TimeoutError):  # nothing to take now
            slots.release()
            continue
        taken += 1
        task = asyncio.create_task(take(args, js, message, cancels, info.config.ack_wait / 3))
        working.add(task)
        task.add_done_callback(working.discard)
        task.add_done_callback(lambda _: slots.release())
    await asyncio.gather(*working)
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
