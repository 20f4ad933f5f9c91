"""The embedded event log: partitioned, append-only, on local disk.

It plays the role Event Hubs or Kafka play in production: dense offsets per partition,
arrival times stamped by the broker and never decreasing within a partition, a broker
clock consumers can read, and retention that deletes old segments.
"""

from tidegate.inputs.event_log.errors import (
    ArrivalAheadError,
    ArrivalOrderError,
    CorruptFrameError,
    EventLogError,
    RetentionError,
)
from tidegate.inputs.event_log.log import EVENT_SCHEMA, AppendResult, EventLog, LogSnapshot, PartitionInfo
from tidegate.inputs.event_log.producer import Producer, partition_for_key

__all__ = [
    "EVENT_SCHEMA",
    "AppendResult",
    "ArrivalAheadError",
    "ArrivalOrderError",
    "CorruptFrameError",
    "EventLog",
    "EventLogError",
    "LogSnapshot",
    "PartitionInfo",
    "Producer",
    "RetentionError",
    "partition_for_key",
]
