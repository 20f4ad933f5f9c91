package tidegate.jvm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.serialization.ByteBufferDeserializer;

/**
 * A range's records through Kafka's Java consumer: for connections {@link WireFeed} does not
 * speak (TLS, SASL) and settings it does not honour ({@code client.rack}). Keys and values
 * reach the columns as views of the fetch response ({@link ByteBufferDeserializer}), not copies.
 */
public final class ConsumerFeed implements RecordFeed {
    private static final Duration POLL = Duration.ofMillis(500);

    private final KafkaRange range;
    private final TopicPartition tp;
    private final KafkaConsumer<ByteBuffer, ByteBuffer> consumer;
    private List<ConsumerRecord<ByteBuffer, ByteBuffer>> pending = List.of();
    private int pendingAt;
    private long position;  // the next offset wanted

    ConsumerFeed(KafkaRange range) {
        this.range = range;
        this.tp = new TopicPartition(range.topic, range.partition);
        this.consumer = new KafkaConsumer<>(consumerConfig(range.client));
        consumer.assign(List.of(tp));
        consumer.seek(tp, range.start);
        this.position = range.start;
    }

    /**
     * The consumer's settings: the job's client settings, the reader's sizes where the job sets
     * none, and what reading a planned range needs whatever the job says.
     *
     * <p>The receive buffer is left to the kernel's autotuning ({@code -1}), not the client's
     * 64 KiB: the classic consumer moves bytes only inside {@code poll}, so with 64 KiB the broker
     * stalls while the task copies records and the rest of each fetch crosses the socket on the
     * task's own thread. The kernel's buffer shortens a partition's polls
     * ({@code bench/bench_source.py --kafka} measures the reader).
     */
    public static Map<String, Object> consumerConfig(Map<String, String> client) {
        Map<String, Object> config = new HashMap<>(client);
        config.putIfAbsent("max.poll.records", String.valueOf(KafkaColumns.ROWS));
        config.putIfAbsent("max.partition.fetch.bytes", String.valueOf(WireFeed.PARTITION_MAX_BYTES));
        config.putIfAbsent("fetch.max.bytes", String.valueOf(WireFeed.FETCH_MAX_BYTES));
        config.putIfAbsent("receive.buffer.bytes", "-1");
        config.putIfAbsent("client.id", WireFeed.CLIENT_ID);
        config.put("key.deserializer", ByteBufferDeserializer.class.getName());
        config.put("value.deserializer", ByteBufferDeserializer.class.getName());
        config.put("enable.auto.commit", "false");  // positions live in Spark's checkpoint
        config.put("isolation.level", "read_committed");  // an open transaction is not input yet; nor an aborted one
        config.put("auto.offset.reset", "none");  // a planned offset retention deleted is an error, not a jump
        config.remove("group.id");  // assigned, never subscribed: no group, nothing committed
        return config;
    }

    @Override
    public boolean fill(KafkaColumns columns) throws IOException {
        while (!columns.full() && position < range.end) {
            if (pendingAt >= pending.size() && !fetch()) {
                break;  // the rest of the range holds no records (transaction markers)
            }
            ConsumerRecord<ByteBuffer, ByteBuffer> record = pending.get(pendingAt++);
            if (record.offset() >= range.end) {
                position = range.end;
                break;
            }
            columns.add(record.offset(), record.timestamp(), record.key(), record.value(),
                columns.headers() == null ? null : record.headers().toArray());
            position = record.offset() + 1;
        }
        return columns.rows() > 0;
    }

    /** Polls until records of the range arrive; false when the consumer moved past the range's end without any. */
    private boolean fetch() throws IOException {
        long deadline = System.currentTimeMillis() + range.timeoutMs;
        while (true) {
            List<ConsumerRecord<ByteBuffer, ByteBuffer>> got;
            long next;
            try {
                got = consumer.poll(POLL).records(tp);
                next = consumer.position(tp);
            } catch (OffsetOutOfRangeException e) {
                throw new IOException(range.retentionError(position), e);
            } catch (KafkaException e) {
                throw new IOException(range.readError(position, e.getMessage()), e);
            }
            if (!got.isEmpty()) {
                pending = got;
                pendingAt = 0;
                return true;
            }
            if (next >= range.end) {
                position = range.end;
                return false;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IOException(range.stallError(position));
            }
        }
    }

    @Override
    public void close() {
        consumer.close(Duration.ZERO);
    }
}
