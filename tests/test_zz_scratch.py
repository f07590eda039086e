import time, logging
import pytest
from kchannel import Producer, Consumer

def test_p(kafka_broker, caplog):
    caplog.set_level(logging.DEBUG, logger="kchannel")
    c = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong")
    c["max.block.ms"] = 15000
    t = time.monotonic()
    p = Producer(c)
    try:
        p.send("t", b"x").get(20)
    except Exception as e:
        print("EXC", type(e), e, time.monotonic() - t)
    p.close(0)
    print(len(caplog.records))
    for r in caplog.records[:30]: print(r.name, r.levelname, r.getMessage())
