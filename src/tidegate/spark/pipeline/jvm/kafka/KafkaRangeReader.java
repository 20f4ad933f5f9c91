package tidegate.jvm;

import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads a {@link KafkaRange} with Kafka's Java consumer into columnar batches of the source's
 * columns, as {@code tidegate.inputs.kafka.log.KafkaLog.read_batches} reads it in Python: committed
 * records only, arrival = the record's timestamp (the broker's append time) in µs, keys and
 * values as UTF-8 text with invalid bytes replaced by U+FFFD (Python's "replace").
 *
 * <p>Loaded by name from {@link LogReaderFactory}, so sessions without Kafka's client jars
 * read the embedded log as before.
 */
public final class KafkaRangeReader implements PartitionReader<ColumnarBatch> {
    private static final int BATCH_ROWS = 8192;
    private static final Duration POLL = Duration.ofMillis(500);

    private final KafkaRange range;
    private final TopicPartition tp;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private List<ConsumerRecord<byte[], byte[]>> pending = List.of();
    private int pendingAt;
    private long position;  // the next offset wanted
    private ColumnarBatch batch;

    public KafkaRangeReader(KafkaRange range) {
        this.range = range;
        this.tp = new TopicPartition(range.topic, range.partition);
        Map<String, Object> config = new HashMap<>(range.client);
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        config.put("enable.auto.commit", "false");  // positions live in Spark's checkpoint
        config.put("isolation.level", "read_committed");  // an open transaction is not input yet
        config.put("auto.offset.reset", "none");  // a planned offset retention deleted is an error, not a jump
        config.put("max.poll.records", String.valueOf(BATCH_ROWS));
        config.put("max.partition.fetch.bytes", String.valueOf(16 << 20));
        config.put("fetch.max.bytes", String.valueOf(64 << 20));
        config.putIfAbsent("client.id", "tidegate-reader");
        config.remove("group.id");  // assigned, never subscribed: no group, nothing committed
        this.consumer = new KafkaConsumer<>(config);
        consumer.assign(List.of(tp));
        consumer.seek(tp, range.start);
        this.position = range.start;
    }

    @Override
    public boolean next() throws IOException {
        release();
        if (position >= range.end) {
            return false;
        }
        int n = 0;
        OnHeapColumnVector offsets = new OnHeapColumnVector(BATCH_ROWS, DataTypes.LongType);
        OnHeapColumnVector arrivals = new OnHeapColumnVector(BATCH_ROWS, DataTypes.TimestampType);
        OnHeapColumnVector keys = new OnHeapColumnVector(BATCH_ROWS, DataTypes.StringType);
        OnHeapColumnVector payloads = new OnHeapColumnVector(BATCH_ROWS, DataTypes.StringType);
        while (n < BATCH_ROWS && position < range.end) {
            if (pendingAt >= pending.size() && !fetch()) {
                break;  // the rest of the range holds no records (transaction markers)
            }
            ConsumerRecord<byte[], byte[]> record = pending.get(pendingAt++);
            if (record.offset() >= range.end) {
                position = range.end;
                break;
            }
            offsets.putLong(n, record.offset());
            arrivals.putLong(n, record.timestamp() * 1000L);
            text(keys, n, record.key());
            text(payloads, n, record.value());
            position = record.offset() + 1;
            n++;
        }
        if (n == 0) {
            offsets.close();
            arrivals.close();
            keys.close();
            payloads.close();
            return false;
        }
        ConstantColumnVector partition = new ConstantColumnVector(n, DataTypes.IntegerType);
        partition.setInt(range.outputPartition);
        batch = new ColumnarBatch(new ColumnVector[] {partition, offsets, arrivals, keys, payloads}, n);
        return true;
    }

    /** Polls until records of the range arrive; false when the consumer moved past the range's end without any. */
    private boolean fetch() throws IOException {
        long deadline = System.currentTimeMillis() + range.timeoutMs;
        while (true) {
            List<ConsumerRecord<byte[], byte[]>> got;
            long next;
            try {
                got = consumer.poll(POLL).records(tp);
                next = consumer.position(tp);
            } catch (OffsetOutOfRangeException e) {
                throw new IOException(error("offset " + position + " is no longer retained (deleted by retention after"
                    + " this micro-batch was planned)", "restart the job: it resumes from its checkpoint, and the start"
                    + " names the deleted span (accept it with --accept-partial)"), e);
            } catch (KafkaException e) {
                throw new IOException(error("reading offsets " + position + "–" + (range.end - 1) + " failed: "
                    + e.getMessage(), "check the broker's health, the topic and the client's credentials;"
                    + " the micro-batch runs again on the next start"), e);
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
                throw new IOException(error("no records arrived from offset " + position + " before " + range.end
                    + " within " + range.timeoutMs / 1000 + " s", "check the broker's health and that the topic"
                    + " still exists; the micro-batch runs again on the next start"));
            }
        }
    }

    private String error(String problem, String fix) {
        return "Kafka topic '" + range.topic + "' on " + range.client.get("bootstrap.servers") + ", partition "
            + range.partition + ": " + problem + " — " + fix;
    }

    private static void text(OnHeapColumnVector column, int row, byte[] bytes) {
        if (bytes == null) {
            column.putNull(row);
            return;
        }
        UTF8String text = UTF8String.fromBytes(bytes);
        if (!text.isValid()) {
            bytes = text.makeValid().getBytes();  // the same U+FFFD replacement Python's "replace" makes
        }
        column.putByteArray(row, bytes);
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    private void release() {
        if (batch != null) {
            batch.close();
            batch = null;
        }
    }

    @Override
    public void close() {
        release();
        consumer.close(Duration.ZERO);
    }
}
