package tidegate.jvm;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The {@code headers} column a {@link KafkaColumns} fills when the job reads it: each record's
 * headers as {@code map<string,string>}, as {@code tidegate.inputs.kafka.headers.decode_headers}
 * makes it in Python — one entry per name, ordered by name (UTF-8 bytes), holding the name's
 * last value; names and values UTF-8 with invalid bytes replaced by U+FFFD; a null value NULL; no
 * headers, the empty map. Headers beyond {@link #MAX_HEADERS} in number or
 * {@link #MAX_HEADER_BYTES} bytes of names and values are not decoded: the row is NULL (the
 * event goes to quarantine), so a hostile record cannot make the task hold more than that.
 */
final class KafkaHeaders {
    static final int MAX_HEADERS = 1024;  // tidegate.inputs.kafka.headers.MAX_HEADERS
    static final int MAX_HEADER_BYTES = 65536;  // tidegate.inputs.kafka.headers.MAX_HEADER_BYTES

    final OnHeapColumnVector column = new OnHeapColumnVector(KafkaColumns.ROWS,
        DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true));
    private final UTF8String[] names = new UTF8String[MAX_HEADERS];
    private final UTF8String[] values = new UTF8String[MAX_HEADERS];
    private final Map<UTF8String, Integer> seen = new HashMap<>();
    private final Integer[] order = new Integer[MAX_HEADERS];
    private int taken;  // headers of the record so far, a name seen before included
    private int count;  // distinct names so far; -1: past the bounds
    private int bytes;
    private int next;  // the next entry's index in the children

    void reset() {
        column.reset();
        next = 0;
    }

    /** Row {@code row}'s headers as Kafka's client decoded them (null: none). */
    void put(int row, Header[] headers) {
        start();
        for (Header header : headers == null ? new Header[0] : headers) {
            if (count < 0) {
                break;
            }
            byte[] value = header.value();
            take(UTF8String.fromString(header.key()), value == null ? null : text(value, 0, value.length));
        }
        finish(row);
    }

    /** Begins a record's headers, read one by one ({@link #take}) in record order, then {@link #finish}ed. */
    void start() {
        taken = 0;
        count = 0;
        bytes = 0;
        seen.clear();
    }

    /** A header whose name and value lie in {@code bytes} (a value length of -1: null). */
    void take(byte[] bytes, int nameFrom, int nameLength, int valueFrom, int valueLength) {
        if (count >= 0) {  // past the bounds nothing more is decoded
            take(text(bytes, nameFrom, nameLength), valueLength < 0 ? null : text(bytes, valueFrom, valueLength));
        }
    }

    /** One header; past the bounds, count becomes -1 and nothing more is taken. */
    private void take(UTF8String name, UTF8String value) {
        bytes += name.numBytes() + (value == null ? 0 : value.numBytes());
        if (++taken > MAX_HEADERS || bytes > MAX_HEADER_BYTES) {
            count = -1;
            return;
        }
        Integer at = seen.get(name);
        if (at != null) {
            values[at] = value;  // the last value of a name wins
            return;
        }
        seen.put(name, count);
        names[count] = name;
        values[count++] = value;
    }

    /** Ends the record's headers: row {@code row} holds them, or NULL when they went past the bounds. */
    void finish(int row) {
        if (count < 0) {
            column.putNull(row);
            return;
        }
        OnHeapColumnVector keys = (OnHeapColumnVector) column.getChild(0);
        OnHeapColumnVector items = (OnHeapColumnVector) column.getChild(1);
        for (int i = 0; i < count; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, 0, count, (a, b) -> names[a].binaryCompare(names[b]));
        for (int j = 0; j < count; j++) {
            int i = order[j];
            keys.appendByteArray(names[i].getBytes(), 0, names[i].numBytes());
            if (values[i] == null) {
                items.appendNull();
            } else {
                items.appendByteArray(values[i].getBytes(), 0, values[i].numBytes());
            }
        }
        column.putArray(row, next, count);
        next += count;
    }

    /** UTF-8 text with invalid bytes replaced by U+FFFD, as KafkaColumns decodes keys and values. */
    private static UTF8String text(byte[] bytes, int from, int length) {
        UTF8String text = UTF8String.fromBytes(bytes, from, length);
        return text.isValid() ? text : text.makeValid();
    }
}
