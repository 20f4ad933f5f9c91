package tidegate.jvm;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
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

/** Reads a {@link LogRange} frame by frame: one columnar batch per frame, sliced to the range. */
final class LogReaderFactory implements PartitionReaderFactory {
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("the tidegate log is read as columnar batches");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new Reader((LogRange) partition);
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
                arrow = new ArrowStreamReader(new ByteArrayInputStream(payload(frame)), allocator);
                if (!arrow.loadNextBatch()) {
                    throw damaged(frame, "its Arrow stream holds no record batch");
                }
                VectorSchemaRoot full = arrow.getVectorSchemaRoot();
                if (full.getRowCount() != range.counts[frame]) {
                    throw damaged(frame, "it holds " + full.getRowCount() + " events, its header says " + range.counts[frame]);
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
                batch = new ColumnarBatch(columns, n);
                return true;
            }
            return false;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
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

        private IOException damaged(int i, String why) {
            return new IOException(
                "tidegate log: the frame of offsets " + range.firstOffsets[i] + "–"
                    + (range.firstOffsets[i] + range.counts[i] - 1) + " in partition " + range.partition + " ("
                    + range.paths[i] + " at byte " + range.positions[i] + ") is damaged: " + why
                    + " — restore the segment from the duplicate region's log or a backup;"
                    + " `tidegate hub describe` lists what each partition holds");
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
