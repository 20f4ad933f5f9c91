package tidegate.jvm;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Planners registered by the Python driver, by the id the source's "planner" option names. */
public final class LogPlanners {
    private static final Map<String, LogPlanner> PLANNERS = new ConcurrentHashMap<>();

    private LogPlanners() {}

    public static void register(String id, LogPlanner planner) {
        PLANNERS.put(id, planner);
    }

    /** A batch read was made: its table holds the planner from here on. */
    public static void forget(String id) {
        PLANNERS.remove(id);
    }

    static LogPlanner get(String id) {
        LogPlanner planner = id == null ? null : PLANNERS.get(id);
        if (planner == null) {
            throw new IllegalStateException(
                "tidegate log source: no planner registered as '" + id + "' in this driver — "
                    + "create the stream with tidegate.spark.pipeline.read.read_log_stream(spark, options), "
                    + "not with format(\"tidegate.jvm.LogSourceProvider\") directly");
        }
        return planner;
    }
}
