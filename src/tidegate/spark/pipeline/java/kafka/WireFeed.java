package tidegate.jvm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.message.FetchRequestData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.MetadataRequestData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.MemoryRecords;

/**
 * A range's records fetched from the partition's leader over Kafka's wire protocol, and read
 * from the fetched bytes straight into the columns ({@link FetchedBatches}).
 *
 * <p>Kafka's consumer makes a {@code ConsumerRecord}, two buffer views and a headers object for
 * every record before a reader sees it; on a local broker that was about 60 % of a read's CPU,
 * and it made a Kafka task cost about 40 % more CPU per record than Spark's Parquet reader. Read
 * in place, 1 M records of four partitions took half the consumer's time.
 *
 * <p>The next fetch is sent as soon as a response is read, so the broker and the socket work
 * while the task copies records. A broker that cannot be reached, or no longer leads the
 * partition, is asked again (the leader looked up anew) until the range's stall timeout.
 *
 * <p>A response that says the broker throttles this client ({@code throttle_time_ms}, KIP-219)
 * holds the next fetch back until the throttle time has passed, as Kafka's clients do.
 *
 * <p>It speaks plaintext to the partition's leader only ({@link #speaks}): the driver gives TLS and
 * SASL connections, and {@code client.rack} (follower fetching), to {@link ConsumerFeed}.
 */
final class WireFeed implements RecordFeed {
    static final int PARTITION_MAX_BYTES = 16 << 20;
    static final int FETCH_MAX_BYTES = 64 << 20;
    static final String CLIENT_ID = "tidegate-reader";
    private static final short[] OLDEST = {4, 1};  // Fetch v4 has isolation and aborted transactions; Metadata v1 topics by name
    private static final short[] NEWEST = {12, 12};  // the newest that still name topics (v13 fetches by topic id)
    private static final ApiKeys[] APIS = {ApiKeys.FETCH, ApiKeys.METADATA};
    private static final byte READ_COMMITTED = 1;

    private final KafkaRange range;
    private final String clientId;
    private final int maxWaitMs;
    private final int minBytes;
    private final int maxBytes;
    private final int partitionMaxBytes;
    private final int connectTimeoutMs;
    private final int readTimeoutMs;
    private final int retryBackoffMs;
    private final int receiveBuffer;
    private final int sendBuffer;
    private final boolean checkCrcs;

    private BrokerWire wire;
    private short fetchVersion;
    private int leaderEpoch = -1;
    private long position;  // the next offset wanted
    private long requested = -1;  // the offset the fetch in flight asked from; -1: none in flight
    private long throttledUntil;  // the broker throttles this client until then (ms): no fetch is sent before
    private FetchedBatches fetched;  // the response being read

    WireFeed(KafkaRange range) {
        this.range = range;
        Map<String, String> client = range.client;
        this.clientId = client.getOrDefault("client.id", CLIENT_ID);
        this.maxWaitMs = Math.min(setting(client, "fetch.max.wait.ms", 500), 500);  // a stalled range is noticed in time
        this.minBytes = setting(client, "fetch.min.bytes", 1);
        this.maxBytes = setting(client, "fetch.max.bytes", FETCH_MAX_BYTES);
        this.partitionMaxBytes = setting(client, "max.partition.fetch.bytes", PARTITION_MAX_BYTES);
        this.connectTimeoutMs = setting(client, "socket.connection.setup.timeout.ms", 10_000);
        this.readTimeoutMs = (int) Math.min((long) setting(client, "request.timeout.ms", 30_000) + maxWaitMs,
            Integer.MAX_VALUE);
        this.retryBackoffMs = setting(client, "retry.backoff.ms", 100);
        this.receiveBuffer = setting(client, "receive.buffer.bytes", -1);
        this.sendBuffer = setting(client, "send.buffer.bytes", -1);
        this.checkCrcs = !"false".equalsIgnoreCase(client.getOrDefault("check.crcs", "true"));
        this.position = range.start;
    }

    /** Whether this feed can read with the job's client settings: plaintext, no follower fetching. */
    static boolean speaks(Map<String, String> client) {
        String protocol = client.getOrDefault("security.protocol", "PLAINTEXT").toUpperCase(Locale.ROOT);
        return protocol.equals("PLAINTEXT") && !client.containsKey("client.rack");
    }

    private static int setting(Map<String, String> client, String name, int otherwise) {
        String value = client.get(name);
        return value == null ? otherwise : Integer.parseInt(value.trim());  // a spec's are checked: a Java int
    }

    @Override
    public boolean fill(KafkaColumns columns) throws IOException {
        while (!columns.full() && position < range.end) {
            if (fetched != null && !fetched.done()) {
                position = fetched.read(columns, position);
            } else if (!nextResponse()) {
                break;  // the rest of the range holds no records (transaction markers, aborted transactions)
            }
        }
        return columns.rows() > 0;
    }

    /** Reads the next fetch response that holds batches; false when none is needed (the range is read). */
    private boolean nextResponse() throws IOException {
        long deadline = System.currentTimeMillis() + range.timeoutMs;
        IOException failure = null;
        while (position < range.end) {
            if (Thread.currentThread().isInterrupted()) {
                throw new Failed(range.readError(position, "interrupted (the task was cancelled)"));
            }
            if (System.currentTimeMillis() > deadline) {
                throw failure != null ? new IOException(range.readError(position, failure.getMessage()), failure)
                    : new IOException(range.stallError(position));
            }
            try {
                if (wire == null) {
                    connect();
                }
                if (requested != position) {
                    if (requested >= 0) {
                        wire.receive();  // asked from elsewhere: read and dropped
                    }
                    waitOutThrottle();
                    sendFetch(position);
                }
                FetchResponseData.PartitionData answer = receiveFetch();
                failure = null;
                Errors error = Errors.forCode(answer.errorCode());
                if (error == Errors.OFFSET_OUT_OF_RANGE) {
                    throw new Failed(range.retentionError(position));
                }
                if (error != Errors.NONE && !(error.exception() instanceof RetriableException)) {
                    throw new Failed(range.readError(position, error.message()));
                }
                if (error != Errors.NONE) {
                    throw new IOException(error.message());  // the leader may have moved: ask the cluster again
                }
                if (read(answer)) {
                    return true;
                }
            } catch (Failed e) {
                throw e;
            } catch (IOException e) {
                failure = e;
                disconnect();
                sleep();
            }
        }
        return false;
    }

    /** A read that asking again cannot mend; its message says what to do. */
    private static final class Failed extends IOException {
        Failed(String message) {
            super(message);
        }
    }

    private void waitOutThrottle() throws IOException {
        long wait = throttledUntil - System.currentTimeMillis();
        if (wait > 0) {
            sleep(wait);
        }
    }

    private void sleep() throws IOException {
        sleep(retryBackoffMs);
    }

    private void sleep(long ms) throws IOException {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failed(range.readError(position, "interrupted (the task was cancelled)"));
        }
    }

    /** Takes a response's batches as the ones to read, and asks for what follows them; false when it holds none. */
    private boolean read(FetchResponseData.PartitionData answer) throws IOException {
        MemoryRecords records = answer.records() instanceof MemoryRecords ? (MemoryRecords) answer.records() : null;
        long next = records == null ? -1 : FetchedBatches.nextOffset(records);
        if (next < 0) {
            return false;  // nothing yet: the broker waited maxWaitMs; ask again
        }
        if (fetched != null) {
            fetched.close();
        }
        fetched = new FetchedBatches(range, records, answer.abortedTransactions(), checkCrcs);
        if (next < range.end && System.currentTimeMillis() >= throttledUntil) {
            sendFetch(next);  // the broker and the socket work while this response is read
        }
        return true;
    }

    private void sendFetch(long offset) throws IOException {
        FetchRequestData.FetchPartition partition = new FetchRequestData.FetchPartition()
            .setPartition(range.partition).setFetchOffset(offset).setPartitionMaxBytes(partitionMaxBytes)
            .setCurrentLeaderEpoch(leaderEpoch).setLogStartOffset(-1);
        FetchRequestData request = new FetchRequestData().setReplicaId(-1).setMaxWaitMs(maxWaitMs)
            .setMinBytes(minBytes).setMaxBytes(maxBytes).setIsolationLevel(READ_COMMITTED)
            .setSessionId(0).setSessionEpoch(-1)  // no fetch session: every request names its partition
            .setTopics(List.of(new FetchRequestData.FetchTopic().setTopic(range.topic).setPartitions(List.of(partition))));
        wire.send(ApiKeys.FETCH, fetchVersion, request);
        requested = offset;
    }

    private FetchResponseData.PartitionData receiveFetch() throws IOException {
        ByteBuffer body = wire.receive();
        requested = -1;
        FetchResponseData reply = new FetchResponseData(new ByteBufferAccessor(body), fetchVersion);
        if (reply.throttleTimeMs() > 0) {
            throttledUntil = System.currentTimeMillis() + reply.throttleTimeMs();
        }
        if (reply.errorCode() != Errors.NONE.code()) {
            return new FetchResponseData.PartitionData().setErrorCode(reply.errorCode());
        }
        for (FetchResponseData.FetchableTopicResponse topic : reply.responses()) {
            for (FetchResponseData.PartitionData partition : topic.partitions()) {
                if (topic.topic().equals(range.topic) && partition.partitionIndex() == range.partition) {
                    return partition;
                }
            }
        }
        throw new IOException("broker " + wire.host + ":" + wire.port + " answered a fetch without the partition");
    }

    /** Connects to the partition's leader, found through the first bootstrap broker that answers. */
    private void connect() throws IOException {
        IOException failure = null;
        for (String address : range.client.get("bootstrap.servers").split(",")) {
            BrokerWire bootstrap = null;
            try {
                bootstrap = open(address.trim());
                short[] versions = bootstrap.versions(APIS, OLDEST, NEWEST);
                MetadataResponseData.MetadataResponseBroker leader = leader(bootstrap, versions[1]);
                if (leader.host().equals(bootstrap.host) && leader.port() == bootstrap.port) {
                    use(bootstrap, versions[0]);
                } else {
                    bootstrap.close();
                    use(open(leader.host(), leader.port()));
                }
                return;
            } catch (IOException e) {
                if (bootstrap != null) {
                    bootstrap.close();
                }
                failure = e;
            }
        }
        throw failure != null ? failure : new IOException("no bootstrap broker given");
    }

    private BrokerWire open(String host, int port) throws IOException {
        return new BrokerWire(host, port, clientId, connectTimeoutMs, readTimeoutMs, receiveBuffer, sendBuffer);
    }

    private void use(BrokerWire leader) throws IOException {
        short version;
        try {
            version = leader.versions(APIS, OLDEST, NEWEST)[0];
        } catch (IOException e) {
            leader.close();
            throw e;
        }
        use(leader, version);
    }

    private void use(BrokerWire leader, short version) throws IOException {
        if (version < 0) {
            leader.close();
            throw new Failed(range.readError(position, "broker " + leader.host + ":" + leader.port
                + " speaks no Fetch version from 4 to 12 (Kafka 0.11 or newer does)"));
        }
        wire = leader;
        fetchVersion = version;
        requested = -1;
    }

    private MetadataResponseData.MetadataResponseBroker leader(BrokerWire bootstrap, short version) throws IOException {
        if (version < 0) {
            throw new Failed(range.readError(position, "broker " + bootstrap.host + ":" + bootstrap.port
                + " speaks no Metadata version from 1 to 12"));
        }
        MetadataRequestData request = new MetadataRequestData().setAllowAutoTopicCreation(false)
            .setTopics(List.of(new MetadataRequestData.MetadataRequestTopic().setName(range.topic)));
        MetadataResponseData reply = new MetadataResponseData(
            new ByteBufferAccessor(bootstrap.call(ApiKeys.METADATA, version, request)), version);
        MetadataResponseData.MetadataResponseTopic topic = reply.topics().find(range.topic);
        if (topic == null || topic.errorCode() != Errors.NONE.code()) {
            throw new IOException(topic == null ? "the broker did not describe the topic"
                : Errors.forCode(topic.errorCode()).message());
        }
        for (MetadataResponseData.MetadataResponsePartition partition : topic.partitions()) {
            if (partition.partitionIndex() == range.partition) {
                MetadataResponseData.MetadataResponseBroker leader = reply.brokers().find(partition.leaderId());
                if (partition.errorCode() != Errors.NONE.code() && partition.errorCode() != Errors.REPLICA_NOT_AVAILABLE.code()
                        || leader == null) {
                    throw new IOException("the partition has no leader now (broker id " + partition.leaderId() + "): "
                        + Errors.forCode(partition.errorCode()).message());
                }
                leaderEpoch = version >= 7 ? partition.leaderEpoch() : -1;
                return leader;
            }
        }
        throw new IOException("the topic has no partition " + range.partition);
    }

    /** "host:port", "[v6 address]:port", either after a listener's "NAME://" as Kafka's clients allow. */
    private BrokerWire open(String address) throws IOException {
        int scheme = address.indexOf("://");
        if (scheme >= 0) {
            address = address.substring(scheme + 3);
        }
        int colon = address.lastIndexOf(':');
        String host = colon > 0 ? address.substring(0, colon) : address;
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            return open(host, Integer.parseInt(address.substring(colon + 1)));
        } catch (NumberFormatException | IndexOutOfBoundsException e) {
            throw new Failed(range.readError(position, "bootstrap server '" + address + "' is not host:port"));
        }
    }

    private void disconnect() {
        if (wire != null) {
            wire.close();
            wire = null;
        }
        requested = -1;
    }

    @Override
    public void close() {
        if (fetched != null) {
            fetched.close();
        }
        disconnect();
    }
}
