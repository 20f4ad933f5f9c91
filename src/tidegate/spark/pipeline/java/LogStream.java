package tidegate.jvm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/** Offsets and ranges come from the Python planner as JSON; Spark stores that JSON as is. */
final class LogStream implements MicroBatchStream, SupportsAdmissionControl, SupportsTriggerAvailableNow {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final LogPlanner planner;
    private final String id = java.util.UUID.randomUUID().toString();

    LogStream(LogPlanner planner) {
        this.planner = planner;
    }

    /** The "ok" value of a planner reply, or the planner's error as this query's failure. */
    static JsonNode answer(String reply) {
        JsonNode node;
        try {
            node = JSON.readTree(reply);
        } catch (Exception e) {
            throw new IllegalStateException("tidegate log source: unreadable planner reply " + reply, e);
        }
        if (node.has("error")) {
            throw new LogSourceException(node.get("error").asText());
        }
        return node.get("ok");
    }

    private static Offset offset(String reply) {
        return new JsonOffset(answer(reply).asText());
    }

    @Override
    public Offset initialOffset() {
        return offset(planner.initialOffset(id));
    }

    @Override
    public Offset deserializeOffset(String json) {
        return new JsonOffset(json);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("the tidegate log source plans with latestOffset(start, limit)");
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        long maxRows = limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : -1L;
        return offset(planner.latestOffset(id, start.json(), maxRows));
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        String limit = answer(planner.defaultReadLimit(id)).asText();
        return "all".equals(limit) ? ReadLimit.allAvailable() : ReadLimit.maxRows(Long.parseLong(limit));
    }

    @Override
    public Offset reportLatestOffset() {
        return offset(planner.reportLatestOffset(id));
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        answer(planner.prepareForTriggerAvailableNow(id));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        return ranges(answer(planner.planRanges(id, start.json(), end.json())));
    }

    /** The planner's ranges as Spark's input partitions: one task per log partition. */
    static InputPartition[] ranges(JsonNode planned) {
        List<InputPartition> ranges = new ArrayList<>();
        for (JsonNode r : planned) {
            if (r.has("kafka")) {
                ranges.add(kafkaRange(r));
                continue;
            }
            JsonNode frames = r.get("frames");
            int n = frames.size();
            JsonNode corrupt = r.get("corruptFrames");
            LogRange range = new LogRange(r.get("partition").asInt(), r.get("start").asLong(), r.get("end").asLong(), n,
                corrupt == null || corrupt.isNull() ? null : corrupt.asText(), r.path("headers").asBoolean(false));
            for (int i = 0; i < n; i++) {
                JsonNode f = frames.get(i);
                range.paths[i] = f.get(0).asText();
                range.positions[i] = f.get(1).asLong();
                range.lengths[i] = f.get(2).asLong();
                range.crcs[i] = f.get(3).asLong();
                range.firstOffsets[i] = f.get(4).asLong();
                range.counts[i] = f.get(5).asInt();
            }
            ranges.add(range);
        }
        return ranges.toArray(new InputPartition[0]);
    }

    /**
     * {"partition", "start", "end", "kafka": {"topic", "timeoutMs", "client": {setting: value}, "reader"}}, and
     * "outputPartition" when the job numbers the topic's partition otherwise (an input of a log set); "headers":
     * true when the rows carry the records' headers.
     */
    private static KafkaRange kafkaRange(JsonNode r) {
        JsonNode kafka = r.get("kafka");
        Map<String, String> client = new HashMap<>();
        kafka.get("client").fields().forEachRemaining(e -> client.put(e.getKey(), e.getValue().asText()));
        int partition = r.get("partition").asInt();
        int output = r.has("outputPartition") ? r.get("outputPartition").asInt() : partition;
        return new KafkaRange(kafka.get("topic").asText(), partition, output, r.get("start").asLong(),
            r.get("end").asLong(), client, kafka.get("timeoutMs").asLong(), "wire".equals(kafka.path("reader").asText()),
            r.path("headers").asBoolean(false));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new LogReaderFactory();
    }

    @Override
    public void commit(Offset end) {
        // the log keeps no consumer positions: Spark's checkpoint is the position
    }

    @Override
    public void stop() {
        try {
            planner.close(id);
        } catch (RuntimeException e) {
            // the driver's Python is gone (the query stops because the driver ends): nothing to forget
        }
    }

    static final class JsonOffset extends Offset {
        private final String json;

        JsonOffset(String json) {
            this.json = json;
        }

        @Override
        public String json() {
            return json;
        }
    }

    /** A planner error (retention, bad options, a damaged checkpoint): its text says what to do. */
    static final class LogSourceException extends IllegalStateException {
        LogSourceException(String message) {
            super(message);
        }
    }
}
