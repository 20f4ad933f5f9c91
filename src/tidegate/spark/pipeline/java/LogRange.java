package tidegate.jvm;

import org.apache.spark.sql.connector.read.InputPartition;

/** Events {@code [start, end)} of one log partition, with the frames that hold them: one task. */
final class LogRange implements InputPartition {
    final int partition;
    final long start;
    final long end;
    final String[] paths;  // segment file of each frame
    final long[] positions;  // byte position of the frame's Arrow IPC payload
    final long[] lengths;
    final long[] crcs;  // CRC32 of the payload, as the frame header records it
    final long[] firstOffsets;
    final int[] counts;
    final String corruptFrames;  // null: a damaged frame fails the task; else skip it and record it in this directory
    final boolean headers;  // the rows carry the column headers: an empty map each (the log keeps no headers)

    LogRange(int partition, long start, long end, int frames, String corruptFrames, boolean headers) {
        this.partition = partition;
        this.headers = headers;
        this.start = start;
        this.end = end;
        this.corruptFrames = corruptFrames;
        this.paths = new String[frames];
        this.positions = new long[frames];
        this.lengths = new long[frames];
        this.crcs = new long[frames];
        this.firstOffsets = new long[frames];
        this.counts = new int[frames];
    }
}
