"""``tidegate kafka …``: a local Kafka broker, topics Tidegate can read, and traffic into them.

``start`` / ``stop`` / ``status`` run a single-node KRaft broker on loopback
(:mod:`tidegate.inputs.kafka.broker`), its data under ``$TIDEGATE_HOME/kafka``; ``create-topic``
makes a topic with append-time timestamps; ``generate`` writes the event-log generator's device
traffic to a topic, stamped by the broker as it arrives. Both first probe a plaintext
listener (:mod:`tidegate.inputs.kafka.listener`): one that speaks TLS is named as such.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tidegate.jobspec.source import tidegate_home

_BOOTSTRAP_HELP = "the broker, host:port (default 127.0.0.1:9092)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kafka", help="a local Kafka broker, topics and traffic")
    ksub = p.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    for name, func, text in (("start", _start, "start a local single-node broker (KRaft) on loopback"),
                             ("stop", _stop, "stop the local broker"),
                             ("status", _status, "is the local broker running, and where")):  # fmt: skip
        a = ksub.add_parser(name, help=text)
        a.add_argument("--data-dir", type=Path, default=None, help="broker data (default $TIDEGATE_HOME/kafka)")
        if name == "start":
            a.add_argument("--port", type=int, default=None, help="listener port (default 9092; 0: any free port)")
        a.set_defaults(func=func)
    t = ksub.add_parser("create-topic", help="create a topic whose records carry the broker's append time")
    t.add_argument("topic", help="the topic's name")
    t.add_argument("--bootstrap", default="127.0.0.1:9092", help=_BOOTSTRAP_HELP)
    t.add_argument("--partitions", type=int, default=4, help="how many partitions (default 4)")
    t.set_defaults(func=_create_topic)
    g = ksub.add_parser("generate", help="device traffic into a topic, at a rate, stamped by the broker")
    g.add_argument("topic", help="the topic to write to (create it first with `kafka create-topic`)")
    g.add_argument("--bootstrap", default="127.0.0.1:9092", help=_BOOTSTRAP_HELP)
    g.add_argument("--events", type=int, default=10_000, help="how many events (default 10,000)")
    g.add_argument("--devices", type=int, default=60, help="devices in the fleet (default 60)")
    g.add_argument("--rate", type=float, default=1_000.0, help="events per second (default 1,000)")
    g.add_argument("--seed", type=int, default=0, help="the same seed gives the same traffic (default 0)")
    g.set_defaults(func=_generate)


def _data_dir(args) -> Path:
    return args.data_dir or tidegate_home() / "kafka"


def _start(args) -> int:
    from tidegate.inputs.kafka import broker

    port = broker.DEFAULT_PORT if args.port is None else (args.port or None)
    state = broker.start(_data_dir(args), port=port)
    print(f"Kafka broker running: bootstrap {state.bootstrap}, pid {state.pid}, data {state.data_dir}")
    return 0


def _stop(args) -> int:
    from tidegate.inputs.kafka import broker

    print("stopped" if broker.stop(_data_dir(args)) else f"no broker runs from {_data_dir(args)}")
    return 0


def _status(args) -> int:
    from tidegate.inputs.kafka import broker

    state = broker.read_state(_data_dir(args))
    if state is None:
        print(f"no broker runs from {_data_dir(args)} (start one: tidegate kafka start)")
        return 1
    print(f"running: bootstrap {state.bootstrap}, pid {state.pid}, data {state.data_dir}")
    return 0


def _create_topic(args) -> int:
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.listener import check_plaintext_listeners
    from tidegate.inputs.kafka.topics import create_topic

    topic = KafkaTopic(args.bootstrap, args.topic)
    check_plaintext_listeners([topic])  # a TLS listener named as plaintext: said plainly, before a client connects
    create_topic(topic, args.partitions)
    print(f"topic {args.topic} on {args.bootstrap}: {args.partitions} partitions, message.timestamp.type=LogAppendTime")
    return 0


def _generate(args) -> int:
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.listener import check_plaintext_listeners
    from tidegate.inputs.kafka.producer import TopicWriter
    from tidegate.inputs.kafka.traffic import kafka_traffic

    topic = KafkaTopic(args.bootstrap, args.topic)
    check_plaintext_listeners([topic])
    writer = TopicWriter(topic)
    print(kafka_traffic(writer, events=args.events, devices=args.devices, rate_per_s=args.rate, seed=args.seed))
    return 0
