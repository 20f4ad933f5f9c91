package tidegate.jvm;

import java.io.IOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.Comparator;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Set;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.message.FetchResponseData.AbortedTransaction;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.CloseableIterator;

/**
 * The record batches of one fetch response, read into the columns: the committed records of the
 * range, in offset order.
 *
 * <p>An uncompressed batch of format v2 (what brokers write since Kafka 0.11) is read in place:
 * each record's varints are decoded where it lies in the response, and its key and value copied
 * from there into the columns, with no object per record. Compressed batches and the older
 * formats go through Kafka's own record iterator. CRCs are checked as the consumer checks them.
 *
 * <p>Committed records only, as Kafka's consumer reads with {@code read_committed}: the broker
 * sends records up to the last stable offset, and names the transactions aborted among them
 * (producer, first offset); a producer's batches are skipped from that offset until its abort
 * marker. Transaction markers (control batches) are never records.
 */
final class FetchedBatches implements AutoCloseable {
    private static final int BASE_TIMESTAMP_AT = 27;  // in a v2 batch
    private static final int COUNT_AT = 57;
    private static final int RECORDS_AT = 61;
    private static final int MAGIC_AT = 16;  // in both formats: after offset, length and 4 more bytes

    private final KafkaRange range;
    private final boolean checkCrcs;
    private final byte[] bytes;
    private final Iterator<MutableRecordBatch> batches;
    private final PriorityQueue<AbortedTransaction> aborted =
        new PriorityQueue<>(Comparator.comparingLong(AbortedTransaction::firstOffset));
    private final Set<Long> abortedProducers = new HashSet<>();
    private int batchAt;  // where in bytes the next batch starts
    private long position;  // the next offset wanted

    // the batch being read: in place (recordsLeft > 0), or through Kafka's iterator (slow != null)
    private int recordAt;
    private int batchEnd;
    private int recordsLeft;
    private long baseOffset;
    private long baseTimestamp;
    private long appendTime;  // the broker's append time of every record of the batch; -1: each record's own
    private long batchNext;
    private CloseableIterator<Record> slow;
    private int cursor;

    FetchedBatches(KafkaRange range, MemoryRecords records, List<AbortedTransaction> abortedTransactions,
                   boolean checkCrcs) {
        this.range = range;
        this.checkCrcs = checkCrcs;
        ByteBuffer buffer = records.buffer();
        this.bytes = buffer.array();
        this.batchAt = buffer.arrayOffset() + buffer.position();
        this.batches = records.batches().iterator();
        if (abortedTransactions != null) {
            aborted.addAll(abortedTransactions);
        }
    }

    /** The offset after the last whole batch of {@code records}; -1 when it holds none. */
    static long nextOffset(MemoryRecords records) {
        ByteBuffer view = records.buffer();
        long next = -1;
        int at = view.position();
        int to = view.limit();
        while (at + MAGIC_AT + 1 <= to) {
            long offset = view.getLong(at);
            int size = Long.BYTES + Integer.BYTES + view.getInt(at + Long.BYTES);
            if (size <= MAGIC_AT || at + size > to) {
                break;
            }
            next = (view.get(at + MAGIC_AT) >= 2 ? offset + view.getInt(at + 23) : offset) + 1;  // v2: last offset delta
            at += size;
        }
        return next;
    }

    /**
     * Adds the records from {@code from} on until the columns are full, the range ends or the
     * batches do; returns the offset after what was read (past markers and aborted batches).
     */
    long read(KafkaColumns columns, long from) throws IOException {
        position = from;
        try {
            while (!columns.full() && position < range.end) {
                if (recordsLeft > 0) {
                    readInPlace(columns);
                } else if (slow != null) {
                    readThroughKafka(columns);
                } else if (!nextBatch()) {
                    break;
                }
            }
        } catch (IndexOutOfBoundsException | BufferUnderflowException | KafkaException e) {
            // bytes that do not hold what their batch header says; with check.crcs=false no CRC caught them first
            throw new IOException(range.readError(position, "the record batch at offset " + baseOffset
                + " is damaged (" + e.getClass().getSimpleName() + (checkCrcs ? "" : "; check.crcs is false, so its "
                + "CRC was not checked") + ")"), e);
        }
        return position;
    }

    /** Whether every batch has been read. */
    boolean done() {
        return recordsLeft == 0 && slow == null && !batches.hasNext();
    }

    private void readInPlace(KafkaColumns columns) throws IOException {
        while (recordsLeft > 0 && !columns.full()) {
            cursor = recordAt;
            int length = varint();
            int end = cursor + length;
            if (length < 0 || end > batchEnd) {
                throw corrupt();
            }
            recordAt = end;
            recordsLeft--;
            cursor++;  // attributes: none defined
            long timestampDelta = varlong();
            long offset = baseOffset + varint();
            int keyLength = varint();
            int keyFrom = cursor;
            cursor += Math.max(keyLength, 0);
            int valueLength = cursor < end ? varint() : -2;
            int valueFrom = cursor;
            cursor += Math.max(valueLength, 0);
            if (keyLength < -1 || valueLength < -1 || cursor > end) {
                throw corrupt();
            }
            if (offset < position) {
                continue;  // a fetch returns whole batches: this one began before the position
            }
            if (offset >= range.end) {
                recordsLeft = 0;
                break;
            }
            if (columns.headers() != null) {
                readHeaders(columns.headers(), columns.rows(), end);
            }
            columns.add(offset, appendTime >= 0 ? appendTime : baseTimestamp + timestampDelta, bytes, keyFrom,
                keyLength, valueFrom, valueLength);
            position = offset + 1;
        }
        if (recordsLeft == 0) {
            passBatch();
        }
    }

    /**
     * The headers of the record being read, from {@code cursor} (after its value) to {@code end}: their
     * count, then per header its name's length, name, value's length (-1: null) and value.
     */
    private void readHeaders(KafkaHeaders headers, int row, int end) throws IOException {
        int count = varint();
        if (count < 0) {
            throw corrupt();
        }
        headers.start();
        for (int i = 0; i < count; i++) {
            int nameLength = varint();
            int nameFrom = cursor;
            cursor += Math.max(nameLength, 0);
            int valueLength = cursor < end ? varint() : -2;
            int valueFrom = cursor;
            cursor += Math.max(valueLength, 0);
            if (nameLength < 0 || valueLength < -1 || cursor > end) {
                throw corrupt();
            }
            headers.take(bytes, nameFrom, nameLength, valueFrom, valueLength);
        }
        headers.finish(row);
    }

    private void readThroughKafka(KafkaColumns columns) {
        while (!columns.full() && slow.hasNext()) {
            Record record = slow.next();
            if (record.offset() < position) {
                continue;
            }
            if (record.offset() >= range.end) {
                break;
            }
            columns.add(record.offset(), record.timestamp(), record.key(), record.value(),
                columns.headers() == null ? null : record.headers());
            position = record.offset() + 1;
        }
        if (columns.full() && slow.hasNext() && position < range.end) {
            return;
        }
        slow.close();
        slow = null;
        passBatch();
    }

    /** The batch is read: the range goes on after its last offset (compaction may have left gaps). */
    private void passBatch() {
        position = Math.min(range.end, Math.max(position, batchNext));
    }

    /** Sets up the next batch that holds records of the range; false when there is none. */
    private boolean nextBatch() throws IOException {
        while (batches.hasNext() && position < range.end) {
            MutableRecordBatch batch = batches.next();
            int at = batchAt;
            batchAt += batch.sizeInBytes();
            baseOffset = batch.baseOffset();
            batchNext = batch.nextOffset();
            if (batchNext <= position) {
                continue;
            }
            if (checkCrcs) {
                try {
                    batch.ensureValid();
                } catch (CorruptRecordException e) {
                    throw new IOException(range.readError(position, "the record batch at offset " + batch.baseOffset()
                        + " is corrupt: " + e.getMessage()), e);
                }
            }
            if (batch.hasProducerId()) {
                while (!aborted.isEmpty() && aborted.peek().firstOffset() <= batch.lastOffset()) {
                    abortedProducers.add(aborted.poll().producerId());
                }
                if (batch.isControlBatch() && abortMarker(batch)) {
                    abortedProducers.remove(batch.producerId());
                } else if (batch.isTransactional() && abortedProducers.contains(batch.producerId())) {
                    passBatch();
                    continue;
                }
            }
            if (batch.isControlBatch()) {
                passBatch();
                continue;
            }
            appendTime = batch.timestampType() == TimestampType.LOG_APPEND_TIME ? batch.maxTimestamp() : -1;
            if (batch.magic() < 2 || batch.isCompressed()) {
                slow = batch.streamingIterator(BufferSupplier.NO_CACHING);
                return true;
            }
            ByteBuffer header = ByteBuffer.wrap(bytes);
            baseTimestamp = header.getLong(at + BASE_TIMESTAMP_AT);
            recordsLeft = header.getInt(at + COUNT_AT);
            recordAt = at + RECORDS_AT;
            batchEnd = batchAt;
            if (recordsLeft > 0) {
                return true;
            }
            passBatch();
        }
        return false;
    }

    private static boolean abortMarker(MutableRecordBatch batch) {
        Iterator<Record> records = batch.iterator();
        return records.hasNext() && ControlRecordType.parse(records.next().key()) == ControlRecordType.ABORT;
    }

    private IOException corrupt() {
        return new IOException(range.readError(position, "a record of the batch at offset " + baseOffset
            + " runs past its batch"));
    }

    private int varint() {
        return (int) varlong();  // a zigzag int reads the same as a zigzag long of its value
    }

    private long varlong() {
        long value = 0;
        int shift = 0;
        byte b;
        do {
            b = bytes[cursor++];
            value |= (long) (b & 0x7f) << shift;
            shift += 7;
        } while (b < 0 && shift < 70);
        return (value >>> 1) ^ -(value & 1);
    }

    @Override
    public void close() {
        if (slow != null) {
            slow.close();
            slow = null;
        }
    }
}
