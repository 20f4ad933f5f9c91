"""Kafka as Tidegate's input: a topic read as "a partitioned log", like the embedded one.

* :mod:`.client` — where a topic lives and how to reach it (bootstrap servers, client
  settings, credentials from the environment); errors that name the topic and the broker.
* :mod:`.connections` — the operator's named connections and the other hosts a spec may name.
* :mod:`.listener` — a plaintext listener probed before a client connects: TLS is refused, said plainly.
* :mod:`.topics` — creating topics whose records carry the broker's append time
  (``message.timestamp.type=LogAppendTime``), and refusing topics that do not.
* :mod:`.log` — :class:`~tidegate.inputs.kafka.log.KafkaLog`: end offsets, earliest retained
  offsets, offset for an arrival time, the broker clock, and reads of ``[start, end)``.
* :mod:`.broker` — a single-node KRaft broker on loopback, for tests and for local use.
* :mod:`.jars` — where ``scripts/bootstrap.sh`` put the broker's and the Spark
  connector's jars.

Nothing here imports pyspark: the controller plans Kafka jobs without a JVM of its own.
"""
