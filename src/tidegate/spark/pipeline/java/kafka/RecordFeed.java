package tidegate.jvm;

import java.io.IOException;

/** Where a {@link KafkaRangeReader} gets the committed records of its range, in offset order. */
interface RecordFeed extends AutoCloseable {
    /**
     * Adds the range's next records to {@code columns} until they are full or the range is read;
     * false when the range holds no more records.
     */
    boolean fill(KafkaColumns columns) throws IOException;

    @Override
    void close();
}
