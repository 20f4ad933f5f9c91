package tidegate.jvm;

import java.io.IOException;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads a {@link KafkaRange} into columnar batches of the source's columns, as
 * {@code tidegate.inputs.kafka.log.KafkaLog.read_batches} reads it in Python: committed records
 * only, arrival = the record's timestamp (the broker's append time) in µs, keys and values as
 * UTF-8 text with invalid bytes replaced by U+FFFD (Python's "replace"); with {@code includeHeaders},
 * each record's headers ({@link KafkaHeaders}).
 *
 * <p>The range names its reader ({@code source.kafka.reader}, resolved by the driver): Kafka's wire
 * protocol ({@link WireFeed}, plaintext listeners only) or Kafka's Java consumer
 * ({@link ConsumerFeed}); both fill the same {@link KafkaColumns}.
 *
 * <p>Loaded by name from {@link LogReaderFactory}, so sessions without Kafka's client jars
 * read the embedded log as before.
 */
public final class KafkaRangeReader implements PartitionReader<ColumnarBatch> {
    private final RecordFeed feed;
    private final KafkaColumns columns;

    public KafkaRangeReader(KafkaRange range) {
        if (range.wire && !WireFeed.speaks(range.client)) {
            throw new IllegalArgumentException(range.error("the wire reader reads plaintext listeners from the "
                + "partition's leader only", "use source.kafka.reader: consumer"));  // the driver refuses it first
        }
        this.feed = range.wire ? new WireFeed(range) : new ConsumerFeed(range);
        this.columns = new KafkaColumns(range.outputPartition, range.headers);
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
