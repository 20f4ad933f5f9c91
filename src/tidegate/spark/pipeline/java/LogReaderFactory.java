package tidegate.jvm;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads a {@link LogRange} frame by frame: one columnar batch per frame, sliced to the range.
 * A frame whose payload fails its CRC (or does not hold what its header says) fails the task,
 * or, when the range names a corrupt-frame directory, is skipped and recorded there.
 */
final class LogReaderFactory implements PartitionReaderFactory {
    private static final int HEADER_SIZE = 48;  // tidegate.inputs.event_log.frames.HEADER_SIZE: payloads follow it

    /** A frame that does not read back; {@code what} is the bare reason, for the record. */
    static final class DamagedFrame extends IOException {
        final String what;

        DamagedFrame(String what, String message) {
            super(message);
            this.what = what;
        }
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("the tidegate log is read as columnar batches");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        if (partition instanceof KafkaRange) {
            return kafkaReader((KafkaRange) partition);
        }
        return new Reader((LogRange) partition);
    }

    /** Kafka's reader, loaded by name: it needs Kafka's client jars, which a session of the embedded log may lack. */
    @SuppressWarnings("unchecked")
    private static PartitionReader<ColumnarBatch> kafkaReader(KafkaRange range) {
        Class<?> reader;
        try {
            reader = Class.forName("tidegate.jvm.KafkaRangeReader");
        } catch (ClassNotFoundException | NoClassDefFoundError e) {
            throw new IllegalStateException(
                "tidegate source: this session's JVM reader was built without Kafka's reader (" + e + ") — run "
                    + "`bash scripts/bootstrap.sh` (it fetches Kafka's client jars into var/jvm/kafka-connector), then "
                    + "start a new session with tidegate.spark.session.build_session", e);
        }
        try {
            return (PartitionReader<ColumnarBatch>) reader.getConstructor(KafkaRange.class).newInstance(range);
        } catch (java.lang.reflect.InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new IllegalStateException(cause);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("tidegate source: cannot create Kafka's reader: " + e, e);
        }
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    private static final class Reader implements PartitionReader<ColumnarBatch> {
        private final LogRange range;
        private final BufferAllocator allocator = new RootAllocator(Long.MAX_VALUE);
        private int frame = -1;
        private FileChannel channel;
        private String channelPath;
        private ArrowStreamReader arrow;
        private VectorSchemaRoot slice;
        private ColumnarBatch batch;

        Reader(LogRange range) {
            this.range = range;
        }

        @Override
        public boolean next() throws IOException {
            release();
            while (++frame < range.paths.length) {
                long first = range.firstOffsets[frame];
                long lo = Math.max(range.start, first);
                long hi = Math.min(range.end, first + range.counts[frame]);
                if (hi <= lo) {
                    continue;
                }
                VectorSchemaRoot full;
                try {
                    full = load(frame);
                } catch (DamagedFrame e) {
                    if (range.corruptFrames == null) {
                        throw e;
                    }
                    release();
                    record(frame, e.what);  // on_corrupt_frame: quarantine — skip its offsets, say so
                    continue;
                }
                int from = (int) (lo - first);
                int n = (int) (hi - lo);
                VectorSchemaRoot rows = full;
                if (from != 0 || n != full.getRowCount()) {
                    slice = full.slice(from, n);
                    rows = slice;
                }
                ConstantColumnVector partition = new ConstantColumnVector(n, DataTypes.IntegerType);
                partition.setInt(range.partition);
                OnHeapColumnVector offsets = new OnHeapColumnVector(n, DataTypes.LongType);
                for (int i = 0; i < n; i++) {
                    offsets.putLong(i, lo + i);
                }
                ColumnVector[] columns = {
                    partition, offsets,
                    new ArrowColumnVector(rows.getVector(0)),  // arrival_time, µs since epoch as Spark's timestamps
                    new ArrowColumnVector(rows.getVector(1)),
                    new ArrowColumnVector(rows.getVector(2)),
                };
                if (range.headers) {
                    columns = java.util.Arrays.copyOf(columns, columns.length + 1);
                    columns[columns.length - 1] = noHeaders(n);
                }
                batch = new ColumnarBatch(columns, n);
                return true;
            }
            return false;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        /** The headers column of {@code n} events of the log: an empty map each. */
        private static ColumnVector noHeaders(int n) {
            OnHeapColumnVector headers = new OnHeapColumnVector(n, LogSourceProvider.HEADERS);
            for (int i = 0; i < n; i++) {
                headers.putArray(i, 0, 0);
            }
            return headers;
        }

        /** Frame {@code i}'s events, checked against its header; DamagedFrame when they are not. */
        private VectorSchemaRoot load(int i) throws IOException {
            arrow = new ArrowStreamReader(new ByteArrayInputStream(payload(i)), allocator);
            try {
                if (!arrow.loadNextBatch()) {
                    throw damaged(i, "its Arrow stream holds no record batch");
                }
            } catch (IOException | RuntimeException e) {
                if (e instanceof DamagedFrame) {
                    throw e;
                }
                throw damaged(i, "its payload is not an Arrow record batch (" + e.getMessage() + ")");
            }
            VectorSchemaRoot full = arrow.getVectorSchemaRoot();
            if (full.getRowCount() != range.counts[i]) {
                throw damaged(i, "it holds " + full.getRowCount() + " events, its header says " + range.counts[i]);
            }
            return full;
        }

        /** The same record tidegate.inputs.event_log.verify.record_skipped writes: one JSON file per skipped span. */
        private void record(int i, String what) throws IOException {
            long first = range.firstOffsets[i];
            long end = first + range.counts[i];
            Path dir = Paths.get(range.corruptFrames);
            Files.createDirectories(dir);
            Path file = dir.resolve(String.format("partition-%05d-offsets-%020d-%020d.json", range.partition, first, end));
            String json = "{\n"
                + "  \"byte_position\": " + (range.positions[i] - HEADER_SIZE) + ",\n"
                + "  \"end_offset\": " + end + ",\n"
                + "  \"offset\": " + first + ",\n"
                + "  \"partition\": " + range.partition + ",\n"
                + "  \"problem\": " + quoted(what) + ",\n"
                + "  \"reason\": \"corrupt frame\",\n"
                + "  \"segment\": " + quoted(range.paths[i]) + "\n"
                + "}\n";
            Path tmp = dir.resolve("." + file.getFileName() + "." + java.util.UUID.randomUUID() + ".tmp");
            Files.write(tmp, json.getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }

        private static String quoted(String text) {
            StringBuilder out = new StringBuilder("\"");
            for (char c : text.toCharArray()) {
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20) {
                    out.append(String.format("\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            return out.append('"').toString();
        }

        private byte[] payload(int i) throws IOException {
            String path = range.paths[i];
            if (!path.equals(channelPath)) {
                closeChannel();
                try {
                    channel = FileChannel.open(Paths.get(path), StandardOpenOption.READ);
                } catch (NoSuchFileException e) {
                    throw new IOException(
                        "tidegate log: segment " + path + " of partition " + range.partition
                            + " was deleted (by retention) after this micro-batch was planned — restart the job:"
                            + " it resumes from its checkpoint, and the start names the deleted span", e);
                }
                channelPath = path;
            }
            long length = range.lengths[i];
            if (length > Integer.MAX_VALUE) {
                throw damaged(i, "its payload length " + length + " is not a frame's");
            }
            ByteBuffer buffer = ByteBuffer.allocate((int) length);
            long position = range.positions[i];
            while (buffer.hasRemaining()) {
                if (channel.read(buffer, position + buffer.position()) < 0) {
                    throw damaged(i, "the segment ends inside it");
                }
            }
            CRC32 crc = new CRC32();
            crc.update(buffer.array());
            if (crc.getValue() != range.crcs[i]) {
                throw damaged(i, "its payload does not match the CRC in its header");
            }
            return buffer.array();
        }

        private DamagedFrame damaged(int i, String why) {
            return new DamagedFrame(why,
                "tidegate log: the frame of offsets " + range.firstOffsets[i] + "–"
                    + (range.firstOffsets[i] + range.counts[i] - 1) + " in partition " + range.partition + " ("
                    + range.paths[i] + " at byte " + (range.positions[i] - HEADER_SIZE) + ") is damaged: " + why
                    + " — run `tidegate event-log verify` and `tidegate event-log repair` on the event log to move it aside"
                    + " (its offsets become a hole readers skip), or restore the segment from the duplicate"
                    + " region's log or a backup; a job may skip such frames with source.on_corrupt_frame: quarantine");
        }

        private void release() throws IOException {
            if (batch != null) {
                batch.close();
                batch = null;
            }
            if (slice != null) {
                slice.close();
                slice = null;
            }
            if (arrow != null) {
                arrow.close();
                arrow = null;
            }
        }

        private void closeChannel() throws IOException {
            if (channel != null) {
                channel.close();
                channel = null;
                channelPath = null;
            }
        }

        @Override
        public void close() throws IOException {
            release();
            closeChannel();
            allocator.close();
        }
    }
}
