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

    KafkaRange(String topic, int partition, int outputPartition, long start, long end, Map<String, String> client,
               long timeoutMs) {
        this.topic = topic;
        this.partition = partition;
        this.outputPartition = outputPartition;
        this.start = start;
        this.end = end;
        this.client = client;
        this.timeoutMs = timeoutMs;
    }

    @Override
    public String toString() {
        return "KafkaRange(" + topic + "/" + partition + " [" + start + ", " + end + "))";
    }
}
