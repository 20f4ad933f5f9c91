package tidegate.jvm;

import java.io.IOException;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads a {@link KafkaRange} into columnar batches of the source's columns, as
 * {@code tidegate.inputs.kafka.log.KafkaLog.read_batches} reads it in Python: committed records
 * only, arrival = the record's timestamp (the broker's append time) in µs, keys and values as
 * UTF-8 text with invalid bytes replaced by U+FFFD (Python's "replace").
 *
 * <p>Plaintext connections are read over Kafka's wire protocol ({@link WireFeed}), the rest
 * through Kafka's Java consumer ({@link ConsumerFeed}); both fill the same {@link KafkaColumns}.
 *
 * <p>Loaded by name from {@link LogReaderFactory}, so sessions without Kafka's client jars
 * read the embedded log as before.
 */
public final class KafkaRangeReader implements PartitionReader<ColumnarBatch> {
    private final RecordFeed feed;
    private final KafkaColumns columns;

    public KafkaRangeReader(KafkaRange range) {
        this.feed = WireFeed.speaks(range.client) ? new WireFeed(range) : new ConsumerFeed(range);
        this.columns = new KafkaColumns(range.outputPartition);
    }

    @Override
    public boolean next() throws IOException {
        columns.reset();
        return feed.fill(columns);
    }

    @Override
    public ColumnarBatch get() {
        return columns.batch();
    }

    @Override
    public void close() {
        columns.close();
        feed.close();
    }
}
