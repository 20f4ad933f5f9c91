package tidegate.jvm;

import java.util.Map;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * Records {@code [start, end)} of one partition of a Kafka topic: one task. {@code client} holds
 * the Java client's settings as {@code tidegate.inputs.kafka.client.KafkaTopic.spark_options} builds them
 * (credentials included when the driver has them), so it is never printed.
 */
final class KafkaRange implements InputPartition {
    final String topic;
    final int partition;
    final int outputPartition;  // the partition column's value: the job's number for this topic partition
    final long start;
    final long end;
    final Map<String, String> client;
    final long timeoutMs;  // no record for this long while the range is unfinished: the task fails, saying so
    final boolean wire;  // read over Kafka's wire protocol ({@link WireFeed}), else through Kafka's consumer
    final boolean headers;  // the rows carry each record's headers (the source's includeHeaders)

    KafkaRange(String topic, int partition, int outputPartition, long start, long end, Map<String, String> client,
               long timeoutMs, boolean wire, boolean headers) {
        this.topic = topic;
        this.partition = partition;
        this.outputPartition = outputPartition;
        this.start = start;
        this.end = end;
        this.client = client;
        this.timeoutMs = timeoutMs;
        this.wire = wire;
        this.headers = headers;
    }

    /** A task's error: which topic, brokers and partition, what went wrong, and what to do. */
    String error(String problem, String fix) {
        return "Kafka topic '" + topic + "' on " + client.get("bootstrap.servers") + ", partition " + partition + ": "
            + problem + " — " + fix;
    }

    String retentionError(long position) {
        return error("offset " + position + " is no longer retained (deleted by retention after this micro-batch was"
            + " planned)", "restart the job: it resumes from its checkpoint, and the start names the deleted span"
            + " (accept it with --accept-partial)");
    }

    String readError(long position, String cause) {
        return error("reading offsets " + position + "–" + (end - 1) + " failed: " + cause, "check the broker's"
            + " health, the topic and the client's credentials; the micro-batch runs again on the next start");
    }

    String stallError(long position) {
        return error("no records arrived from offset " + position + " before " + end + " within " + timeoutMs / 1000
            + " s", "check the broker's health and that the topic still exists; the micro-batch runs again on the"
            + " next start");
    }

    @Override
    public String toString() {
        return "KafkaRange(" + topic + "/" + partition + " [" + start + ", " + end + "))";
    }
}
