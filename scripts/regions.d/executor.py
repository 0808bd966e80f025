#!/usr/bin/env python3
"""The executor of one region of scripts/regions: a durable pull consumer on each stream
named, every message recorded as one JSON line, acknowledged, and reported SUCCESS.

    executor.py --nats URL --region R --stream KAIROS_LAUNCH_EU [--stream KAIROS_LAUNCH]
                --out FILE

Each line of FILE: {msg_id, key, schedule_id, region, scheduled_for,
received_at and stored_at (Unix seconds: when this executor got it, when its stream stored
it), stream, seq, delivered, attempt, executor}; `region` is the launch message's own (null
when absent). Each pulled batch is written, then acknowledged (ack
policy `all`: one acknowledgement per batch), then `{"idempotency_key": key, "status":
"SUCCESS"}` is published on kairos.status.<key> for each (a plain publish, which the status
stream stores: cheap enough for a thousand runs a second on two cores; a report published
while the status stream is out of reach is lost, and kairos publishes that run again after
its start timeout, into the launch stream's duplicate window). A stream that does not exist
yet (kairos creates it) is waited for. The consumer is durable (`regions-executor`), so a
killed and revived executor goes on where it stopped; a batch not acknowledged comes again
(same stream sequences: `delivered` > 1).
"""

import argparse
import asyncio
import json
import signal
import sys
import time

import nats
from nats.js import api
from nats.js.errors import NotFoundError

DURABLE = "regions-executor"
FETCH = 500


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


class Recorder:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1 << 16)
        self.count = 0

    def write(self, record):
        self.file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.count += 1

    def flush(self):
        self.file.flush()


async def consumer_for(js, stream):
    """Binds the durable pull consumer of `stream`, waiting for the stream to exist."""
    announced = False
    while True:
        try:
            try:
                await js.consumer_info(stream, DURABLE, timeout=5)
            except NotFoundError:
                await js.add_consumer(
                    stream,
                    api.ConsumerConfig(
                        durable_name=DURABLE,
                        ack_policy=api.AckPolicy.ALL,
                        deliver_policy=api.DeliverPolicy.ALL,
                        ack_wait=30,
                        max_ack_pending=50000,
                    ),
                    timeout=5,
                )
            return await js.pull_subscribe_bind(DURABLE, stream)
        except Exception as err:  # noqa: BLE001 - not there yet, or NATS not answering
            if not announced:
                log(f"waiting for stream {stream}: {err!r}")
                announced = True
            await asyncio.sleep(1)


async def consume(js, nc, stream, recorder, executor):
    sub = await consumer_for(js, stream)
    log(f"consuming {stream}")
    while True:
        try:
            messages = await sub.fetch(FETCH, timeout=1)
        except asyncio.TimeoutError:
            continue
        except Exception as err:  # noqa: BLE001 - a pull that failed: pull again
            if "timeout" not in repr(err).lower():
                log(f"{stream}: fetch failed: {err!r}")
            await asyncio.sleep(0.2)
            continue
        now = time.time()
        keys = []
        for msg in messages:
            try:
                body = json.loads(msg.data)
            except ValueError:
                body = {}
            meta = msg.metadata
            key = body.get("idempotency_key", "")
            keys.append(key)
            recorder.write(
                {
                    "msg_id": (msg.headers or {}).get("Nats-Msg-Id"),
                    "key": key,
                    "schedule_id": body.get("schedule_id"),
                    "region": body.get("region"),
                    "scheduled_for": body.get("scheduled_for"),
                    "received_at": now,
                    "stored_at": meta.timestamp.timestamp(),
                    "stream": stream,
                    "seq": meta.sequence.stream,
                    "delivered": meta.num_delivered,
                    "attempt": body.get("attempt"),
                    "executor": executor,
                }
            )
        recorder.flush()
        if not messages:
            continue
        # Acknowledge policy `all`: the last message of the batch acknowledges the batch.
        try:
            await messages[-1].ack()
        except Exception as err:  # noqa: BLE001 - comes again after ack_wait
            log(f"{stream}: ack failed: {err!r}")
        for key in keys:
            if key:
                body = json.dumps({"idempotency_key": key, "status": "SUCCESS"}).encode()
                await nc.publish(f"kairos.status.{key}", body)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nats", required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--stream", action="append", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    async def disconnected():
        log("disconnected")

    async def reconnected():
        log("reconnected")

    nc = None
    while nc is None:
        try:
            nc = await nats.connect(
                args.nats,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.5,
                disconnected_cb=disconnected,
                reconnected_cb=reconnected,
            )
        except Exception as err:  # noqa: BLE001
            log(f"connecting to {args.nats}: {err!r}")
            await asyncio.sleep(1)
    js = nc.jetstream(timeout=5)
    recorder = Recorder(args.out)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    executor = f"regions-{args.region}"
    tasks = [
        asyncio.ensure_future(consume(js, nc, stream, recorder, executor)) for stream in args.stream
    ]
    await stop.wait()
    recorder.flush()
    for task in tasks:
        task.cancel()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
