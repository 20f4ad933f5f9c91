package tidegate.jvm;

import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;

import org.apache.kafka.common.message.ApiVersionsRequestData;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestUtils;
import org.apache.kafka.common.requests.ResponseHeader;

/**
 * One plaintext connection to a Kafka broker, speaking its wire protocol with Kafka's own message
 * classes: requests go out in order, and their responses come back in that order (a broker answers
 * one connection's requests one at a time), so a request may be sent before the last one's answer
 * is read. Each response is read whole into one array: its record batches are views of it.
 */
final class BrokerWire implements AutoCloseable {
    final String host;
    final int port;
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final String clientId;
    private final ArrayDeque<RequestHeader> sent = new ArrayDeque<>();
    private int correlation;

    BrokerWire(String host, int port, String clientId, int connectTimeoutMs, int readTimeoutMs, int receiveBuffer,
               int sendBuffer) throws IOException {
        this.host = host;
        this.port = port;
        this.clientId = clientId;
        this.socket = new Socket();
        try {
            socket.setTcpNoDelay(true);
            if (receiveBuffer > 0) {  // else the kernel's autotuning, as the reader's consumer is set
                socket.setReceiveBufferSize(receiveBuffer);
            }
            if (sendBuffer > 0) {
                socket.setSendBufferSize(sendBuffer);
            }
            socket.connect(new InetSocketAddress(host, port), connectTimeoutMs);
            socket.setSoTimeout(readTimeoutMs);
            this.in = new DataInputStream(socket.getInputStream());
            this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        } catch (IOException e) {
            socket.close();
            throw new IOException("cannot connect to broker " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /** Sends a request without waiting for its answer. */
    void send(ApiKeys api, short version, ApiMessage body) throws IOException {
        RequestHeader header = new RequestHeader(api, version, clientId, ++correlation);
        ByteBuffer request = RequestUtils.serialize(header.data(), header.headerVersion(), body, version);
        out.writeInt(request.remaining());
        out.write(request.array(), request.arrayOffset() + request.position(), request.remaining());
        out.flush();
        sent.add(header);
    }

    /** The answer to the oldest request not yet answered, positioned at its body. */
    ByteBuffer receive() throws IOException {
        RequestHeader header = sent.poll();
        if (header == null) {
            throw new IllegalStateException("no request awaits an answer");
        }
        int size;
        byte[] bytes;
        try {
            size = in.readInt();
            if (size < 0) {
                throw new IOException("broker " + host + ":" + port + " sent a response of " + size + " bytes");
            }
            bytes = new byte[size];
            in.readFully(bytes);
        } catch (EOFException e) {
            throw new IOException("broker " + host + ":" + port + " closed the connection", e);
        }
        ByteBuffer response = ByteBuffer.wrap(bytes);
        ResponseHeader answer = ResponseHeader.parse(response, header.apiKey().responseHeaderVersion(header.apiVersion()));
        if (answer.correlationId() != header.correlationId()) {
            throw new IOException("broker " + host + ":" + port + " answered request " + answer.correlationId()
                + " where " + header.correlationId() + " was due");
        }
        return response;
    }

    /** Sends a request and reads its answer (none may be outstanding). */
    ByteBuffer call(ApiKeys api, short version, ApiMessage body) throws IOException {
        send(api, version, body);
        return receive();
    }

    /** Whether requests have been sent whose answers are not read yet. */
    boolean awaiting() {
        return !sent.isEmpty();
    }

    /**
     * For each of {@code apis}, the newest version both sides speak, from {@code oldest} to
     * {@code newest}; -1 where the broker speaks none of those.
     */
    short[] versions(ApiKeys[] apis, short[] oldest, short[] newest) throws IOException {
        ApiVersionsResponseData reply = new ApiVersionsResponseData();
        reply.read(new ByteBufferAccessor(call(ApiKeys.API_VERSIONS, (short) 0, new ApiVersionsRequestData())), (short) 0);
        if (reply.errorCode() != Errors.NONE.code()) {
            throw new IOException("broker " + host + ":" + port + " refused ApiVersions: "
                + Errors.forCode(reply.errorCode()).message());
        }
        short[] chosen = new short[apis.length];
        for (int i = 0; i < apis.length; i++) {
            ApiVersionsResponseData.ApiVersion theirs = reply.apiKeys().find(apis[i].id);
            short version = theirs == null ? -1 : (short) Math.min(newest[i], theirs.maxVersion());
            chosen[i] = theirs != null && version >= oldest[i] && version >= theirs.minVersion() ? version : -1;
        }
        return chosen;
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing: nothing more to read from it
        }
    }
}
