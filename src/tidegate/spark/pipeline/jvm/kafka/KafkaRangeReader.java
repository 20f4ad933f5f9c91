package tidegate.jvm;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
 * <p>Each record's key and value are copied once, from the fetched bytes into the column
 * vectors ({@link ByteBufferDeserializer} hands out views of the fetch response, not copies),
 * and the vectors are reset and refilled for each batch, as Spark's Parquet reader does: the
 * batch {@link #get} returns is read before the next {@link #next}. Text that is all ASCII,
 * tested eight bytes at a time, is valid UTF-8 without decoding it.
 *
 * <p>Loaded by name from {@link LogReaderFactory}, so sessions without Kafka's client jars
 * read the embedded log as before.
 */
public final class KafkaRangeReader implements PartitionReader<ColumnarBatch> {
    private static final int BATCH_ROWS = 8192;
    private static final Duration POLL = Duration.ofMillis(500);
    private static final VarHandle WORDS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final long HIGH_BITS = 0x8080808080808080L;

    private final KafkaRange range;
    private final TopicPartition tp;
    private final KafkaConsumer<ByteBuffer, ByteBuffer> consumer;
    private List<ConsumerRecord<ByteBuffer, ByteBuffer>> pending = List.of();
    private int pendingAt;
    private long position;  // the next offset wanted
    private final OnHeapColumnVector offsets = new OnHeapColumnVector(BATCH_ROWS, DataTypes.LongType);
    private final OnHeapColumnVector arrivals = new OnHeapColumnVector(BATCH_ROWS, DataTypes.TimestampType);
    private final OnHeapColumnVector keys = new OnHeapColumnVector(BATCH_ROWS, DataTypes.StringType);
    private final OnHeapColumnVector payloads = new OnHeapColumnVector(BATCH_ROWS, DataTypes.StringType);
    private final ColumnarBatch batch;

    public KafkaRangeReader(KafkaRange range) {
        this.range = range;
        this.tp = new TopicPartition(range.topic, range.partition);
        this.consumer = new KafkaConsumer<>(consumerConfig(range.client));
        consumer.assign(List.of(tp));
        consumer.seek(tp, range.start);
        this.position = range.start;
        ConstantColumnVector partition = new ConstantColumnVector(BATCH_ROWS, DataTypes.IntegerType);
        partition.setInt(range.outputPartition);
        this.batch = new ColumnarBatch(new ColumnVector[] {partition, offsets, arrivals, keys, payloads});
    }

    /**
     * The consumer's settings: the job's client settings, the reader's sizes where the job sets
     * none, and what reading a planned range needs whatever the job says.
     *
     * <p>The receive buffer is left to the kernel's autotuning ({@code -1}), not the client's
     * 64 KiB: the classic consumer moves bytes only inside {@code poll}, so with 64 KiB the broker
     * stalls while the task copies records and the rest of each fetch crosses the socket on the
     * task's own thread. Measured on a local broker, 1 M records in four partitions: a partition's
     * poll time fell from 50–130 ms to 30–60 ms.
     */
    public static Map<String, Object> consumerConfig(Map<String, String> client) {
        Map<String, Object> config = new HashMap<>(client);
        config.putIfAbsent("max.poll.records", String.valueOf(BATCH_ROWS));
        config.putIfAbsent("max.partition.fetch.bytes", String.valueOf(16 << 20));
        config.putIfAbsent("fetch.max.bytes", String.valueOf(64 << 20));
        config.putIfAbsent("receive.buffer.bytes", "-1");
        config.putIfAbsent("client.id", "tidegate-reader");
        config.put("key.deserializer", ByteBufferDeserializer.class.getName());
        config.put("value.deserializer", ByteBufferDeserializer.class.getName());
        config.put("enable.auto.commit", "false");  // positions live in Spark's checkpoint
        config.put("isolation.level", "read_committed");  // an open transaction is not input yet; nor an aborted one
        config.put("auto.offset.reset", "none");  // a planned offset retention deleted is an error, not a jump
        config.remove("group.id");  // assigned, never subscribed: no group, nothing committed
        return config;
    }

    @Override
    public boolean next() throws IOException {
        if (position >= range.end) {
            return false;
        }
        int n = 0;
        offsets.reset();
        arrivals.reset();
        keys.reset();
        payloads.reset();
        while (n < BATCH_ROWS && position < range.end) {
            if (pendingAt >= pending.size() && !fetch()) {
                break;  // the rest of the range holds no records (transaction markers)
            }
            ConsumerRecord<ByteBuffer, ByteBuffer> record = pending.get(pendingAt++);
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
            return false;
        }
        batch.setNumRows(n);
        return true;
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

    private static void text(OnHeapColumnVector column, int row, ByteBuffer view) {
        if (view == null) {
            column.putNull(row);
            return;
        }
        byte[] bytes;
        int from;
        int length = view.remaining();
        if (view.hasArray()) {
            bytes = view.array();
            from = view.arrayOffset() + view.position();
        } else {
            bytes = new byte[length];
            view.duplicate().get(bytes);
            from = 0;
        }
        if (!ascii(bytes, from, length)) {
            UTF8String text = UTF8String.fromBytes(bytes, from, length);
            if (!text.isValid()) {
                bytes = text.makeValid().getBytes();  // the same U+FFFD replacement Python's "replace" makes
                from = 0;
                length = bytes.length;
            }
        }
        column.putByteArray(row, bytes, from, length);
    }

    /** Whether {@code length} bytes from {@code from} are all ASCII (and so valid UTF-8). */
    private static boolean ascii(byte[] bytes, int from, int length) {
        int i = 0;
        for (; i + Long.BYTES <= length; i += Long.BYTES) {
            if (((long) WORDS.get(bytes, from + i) & HIGH_BITS) != 0) {
                return false;
            }
        }
        for (; i < length; i++) {
            if (bytes[from + i] < 0) {
                return false;
            }
        }
        return true;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        batch.close();
        consumer.close(Duration.ZERO);
    }
}
