package tidegate.jvm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The column vectors one {@link KafkaRangeReader} fills: the source's columns, refilled for each
 * batch of up to {@link #ROWS} records, as Spark's Parquet reader refills its vectors (the batch
 * {@link #batch} returns is read before the next is filled).
 *
 * <p>A record's key and value are copied once, from the fetched bytes into the vectors, as
 * UTF-8 text with invalid bytes replaced by U+FFFD (Python's "replace"). Text that is all
 * ASCII, tested eight bytes at a time, is valid UTF-8 without decoding it.
 *
 * <p>With {@code headers} (the source's {@code includeHeaders}: the job reads them) the batch
 * has a sixth column, {@link KafkaHeaders}; without, records' headers are never looked at.
 */
final class KafkaColumns implements AutoCloseable {
    static final int ROWS = 8192;
    private static final VarHandle WORDS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final long HIGH_BITS = 0x8080808080808080L;

    private final OnHeapColumnVector offsets = new OnHeapColumnVector(ROWS, DataTypes.LongType);
    private final OnHeapColumnVector arrivals = new OnHeapColumnVector(ROWS, DataTypes.TimestampType);
    private final OnHeapColumnVector keys = new OnHeapColumnVector(ROWS, DataTypes.StringType);
    private final OnHeapColumnVector payloads = new OnHeapColumnVector(ROWS, DataTypes.StringType);
    private final KafkaHeaders headers;
    private final ColumnarBatch batch;
    private int rows;

    KafkaColumns(int outputPartition, boolean withHeaders) {
        ConstantColumnVector partition = new ConstantColumnVector(ROWS, DataTypes.IntegerType);
        partition.setInt(outputPartition);
        this.headers = withHeaders ? new KafkaHeaders() : null;
        this.batch = new ColumnarBatch(withHeaders
            ? new ColumnVector[] {partition, offsets, arrivals, keys, payloads, headers.column}
            : new ColumnVector[] {partition, offsets, arrivals, keys, payloads});
    }

    /** The headers column, filled for row {@link #rows} before its record is added; null when the job reads none. */
    KafkaHeaders headers() {
        return headers;
    }

    /** Empties the vectors for the next batch. */
    void reset() {
        rows = 0;
        offsets.reset();
        arrivals.reset();
        keys.reset();
        payloads.reset();
        if (headers != null) {
            headers.reset();
        }
    }

    int rows() {
        return rows;
    }

    boolean full() {
        return rows >= ROWS;
    }

    /** Adds a record whose key and value lie in {@code bytes} (a length of -1: null). */
    void add(long offset, long timestampMs, byte[] bytes, int keyFrom, int keyLength, int valueFrom, int valueLength) {
        offsets.putLong(rows, offset);
        arrivals.putLong(rows, timestampMs * 1000L);
        text(keys, rows, bytes, keyFrom, keyLength);
        text(payloads, rows, bytes, valueFrom, valueLength);
        rows++;
    }

    /** Adds a record whose key and value are buffer views (null: null), with the headers Kafka's client read. */
    void add(long offset, long timestampMs, ByteBuffer key, ByteBuffer value, Header[] recordHeaders) {
        if (headers != null) {
            headers.put(rows, recordHeaders);
        }
        offsets.putLong(rows, offset);
        arrivals.putLong(rows, timestampMs * 1000L);
        text(keys, rows, key);
        text(payloads, rows, value);
        rows++;
    }

    ColumnarBatch batch() {
        batch.setNumRows(rows);
        return batch;
    }

    private static void text(OnHeapColumnVector column, int row, ByteBuffer view) {
        if (view == null) {
            column.putNull(row);
        } else if (view.hasArray()) {
            text(column, row, view.array(), view.arrayOffset() + view.position(), view.remaining());
        } else {
            byte[] bytes = new byte[view.remaining()];
            view.duplicate().get(bytes);
            text(column, row, bytes, 0, bytes.length);
        }
    }

    private static void text(OnHeapColumnVector column, int row, byte[] bytes, int from, int length) {
        if (length < 0) {
            column.putNull(row);
            return;
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
    public void close() {
        batch.close();
    }
}
