"""The embedded event log ("hub"): partitioned, append-only, on local disk.

It plays the role Event Hubs or Kafka play in production: dense offsets per partition,
arrival times stamped by the broker and never decreasing within a partition, a broker
clock consumers can read, and retention that deletes old segments.
"""

from tidegate.inputs.embedded.errors import (
    ArrivalAheadError,
    ArrivalOrderError,
    CorruptFrameError,
    HubError,
    RetentionError,
)
from tidegate.inputs.embedded.log import EVENT_SCHEMA, AppendResult, EventLog, LogSnapshot, PartitionInfo
from tidegate.inputs.embedded.producer import Producer, partition_for_key

__all__ = [
    "EVENT_SCHEMA",
    "AppendResult",
    "ArrivalAheadError",
    "ArrivalOrderError",
    "CorruptFrameError",
    "EventLog",
    "HubError",
    "LogSnapshot",
    "PartitionInfo",
    "Producer",
    "RetentionError",
    "partition_for_key",
]
