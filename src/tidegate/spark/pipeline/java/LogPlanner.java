package tidegate.jvm;

/**
 * The planning half of the log source, answered by the Python driver through Py4J
 * ({@code tidegate.spark.pipeline.java_source.Planner}): the same code the Python data source plans
 * with, so offsets, limits and the recorded clock are identical on both paths.
 *
 * <p>A planner serves one read: a streaming query's (its streams' offsets and ranges) or a batch
 * read's (the span fixed when the DataFrame was made, so every plan of it reads the same events).
 *
 * <p>Every method returns JSON {@code {"ok": value}} or {@code {"error": "what and what to do"}}.
 */
public interface LogPlanner {
    // `stream` names one MicroBatchStream (one query run): each keeps its own planning state

    String initialOffset(String stream);

    /** {@code maxRows} -1: read everything available; otherwise Spark's ReadMaxRows limit. */
    String latestOffset(String stream, String start, long maxRows);

    String reportLatestOffset(String stream);

    String prepareForTriggerAvailableNow(String stream);

    /** "all" or the default row limit per micro-batch. */
    String defaultReadLimit(String stream);

    /** The ranges of {@code [start, end)}: per log partition, the frames that hold them. */
    String planRanges(String stream, String start, String end);

    /** A batch read's ranges: the span its planner was made for, resolved once in the driver. */
    String planBatch(String stream);

    /** The stream stopped: forget its state. */
    void close(String stream);
}
