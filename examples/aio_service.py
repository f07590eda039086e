"""A small asyncio service on kchannel.aio: an HTTP endpoint that produces
each request's body to a topic, and a consumer task reading the topic in a
group, on one event loop and with no thread.

    python examples/aio_service.py --bootstrap-server localhost:9092 \
        --topic page-views [--port 8080] [--group page-view-stats] \
        [--command-config examples/client-ssl.properties]

    curl -d '/pricing' -H 'X-Key: user-7' localhost:8080/produce
    {"topic": "page-views", "partition": 0, "offset": 41}
    curl localhost:8080/stats
    {"consumed": 42, "last_offset": {"page-views-0": 41}}

The HTTP side is plain asyncio (``asyncio.start_server``, HTTP/1.1 with
``Connection: close``), to need nothing beyond kchannel; an aiohttp or
FastAPI handler would call ``producer.send_and_wait`` the same way.
SIGINT/SIGTERM stop it: the consumer leaves the group, the producer sends
what it holds, then the process exits 0.
"""
import argparse
import asyncio
import json
import signal
import sys

from kchannel.aio import AIOConsumer, AIOProducer
from kchannel.config.properties import load_properties


class Service:
    def __init__(self, topic, producer):
        self.topic = topic
        self.producer = producer
        self.consumed = 0
        self.last_offset = {}

    # -- HTTP ------------------------------------------------------------------------
    async def handle(self, reader, writer):
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            head = request.decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip()
                       for k, v in (line.split(":", 1) for line in head[1:] if ":" in line)}
            body = await reader.readexactly(int(headers.get("content-length", 0)))
            if method == "POST" and path == "/produce":
                key = headers.get("x-key")
                md = await self.producer.send_and_wait(
                    self.topic, body, key=key.encode() if key else None)
                status, answer = "200 OK", {"topic": md.topic, "partition": md.partition,
                                            "offset": md.offset}
            elif method == "GET" and path == "/stats":
                status, answer = "200 OK", {"consumed": self.consumed,
                                            "last_offset": self.last_offset}
            else:
                status, answer = "404 Not Found", {"error": f"no route {method} {path}"}
        except Exception as exc:   # noqa: BLE001 - the client is told, the service goes on
            status, answer = "500 Internal Server Error", {"error": str(exc)}
        data = json.dumps(answer).encode() + b"\n"
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                     + data)
        try:
            await writer.drain()
        finally:
            writer.close()

    # -- consumer task -----------------------------------------------------------------
    async def consume(self, consumer):
        consumer.subscribe([self.topic])
        async for record in consumer:
            self.consumed += 1
            self.last_offset[f"{record.topic}-{record.partition}"] = record.offset


async def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--group", default="page-view-stats")
    ap.add_argument("--command-config", help="client properties (security settings)")
    args = ap.parse_args(argv)
    configs = dict(load_properties(args.command_config)) if args.command_config else {}
    configs["bootstrap.servers"] = args.bootstrap_server
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with AIOProducer(configs) as producer, \
            AIOConsumer({**configs, "group.id": args.group,
                         "auto.offset.reset": "earliest"}) as consumer:
        service = Service(args.topic, producer)
        server = await asyncio.start_server(service.handle, "127.0.0.1", args.port)
        port = server.sockets[0].getsockname()[1]
        print(f"listening on 127.0.0.1:{port}, topic {args.topic}", flush=True)
        consuming = asyncio.create_task(service.consume(consumer))
        await stop.wait()
        server.close()
        await server.wait_closed()
        consuming.cancel()
        try:
            await consuming
        except asyncio.CancelledError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
