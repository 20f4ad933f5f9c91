package tidegate.jvm;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.InternalRow$;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * semantics §2's per-event policy on the executors' JVM: the same scan as the core's
 * {@code tidegate.eventtime.policy.apply_policy}, which stays the executable spec that the
 * tests hold this class to. Each task holds whole log partitions; it runs their events in
 * offset order, one unit state (maxS) per substream key and one arrival term per
 * partition, and returns the rows {@code policy_stage.apply_policy_stage} returns from
 * Python workers: events ("e"), untouched bad input ("q", numbered per partition in offset order),
 * next state ("s"), counts ("m").
 *
 * <p>It reads and writes Spark's internal rows, so an event's columns pass through as Spark
 * holds them (text as UTF-8 bytes, times as microseconds). Through a {@code Row} encoder each
 * column of each event became a Java object on the way in and an internal value again on the
 * way out, which cost more than the scan itself.
 */
public final class PolicyScan implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final UTF8String EVENT = UTF8String.fromString("e"), BAD_INPUT = UTF8String.fromString("q"),
        STATE = UTF8String.fromString("s"), COUNTS = UTF8String.fromString("m");
    static final long NONE = Long.MIN_VALUE;  // "no value yet", as the core's int64 NONE
    static final byte KEPT = 0, ADJUSTED = 1, DROPPED = 2;
    static final byte NO_REASON = 0, EARLY = 1, LATE = 2, OUT_OF_ORDER = 3, LATE_AND_OUT_OF_ORDER = 4;
    static final long HEARTBEAT_OFFSET = -1;

    private final int width;  // columns of an output row
    private final DataType[] eventTypes;  // the event columns, in the input's order, right after _kind
    private transient scala.Function2<SpecializedGetters, Object, Object>[] getters;  // per event column, per task
    private final int partitionAt, offsetAt, arrivalAt, eventAt, unitAt, rejectAt;
    private final int badSeqAt;  // the output column numbering each partition's bad input rows
    private final Tolerances job;  // the policy of every partition not in own
    private final Map<Integer, Tolerances> own;  // partitions of inputs with their own policy
    private final long clock;  // the broker clock of this batch, NONE without one
    private final Map<Integer, PartitionState> states;  // previous states of the batch's partitions

    /** One policy's tolerances and actions ({@code TimePolicy} in the core); early NONE: the rule is off. */
    static final class Tolerances implements java.io.Serializable {
        final long ooo, late, early;
        final boolean oooDrop, lateDrop;

        Tolerances(long ooo, boolean oooDrop, long late, boolean lateDrop, long early) {
            this.ooo = ooo;
            this.oooDrop = oooDrop;
            this.late = late;
            this.lateDrop = lateDrop;
            this.early = early;
        }
    }

    /** What the policy carries between batches of one log partition ({@code PartitionState} in the core). */
    static final class PartitionState implements java.io.Serializable {
        long arrivalWatermark = NONE;
        long lastArrival = NONE;
        final HashMap<String, Long> maxSystem = new HashMap<>();  // key null: the unit of a job without over

        PartitionState copy() {
            PartitionState c = new PartitionState();
            c.arrivalWatermark = arrivalWatermark;
            c.lastArrival = lastArrival;
            c.maxSystem.putAll(maxSystem);
            return c;
        }
    }

    private PolicyScan(StructType in, StructType outSchema, Map<Integer, PartitionState> states, Tolerances job,
                       Map<Integer, Tolerances> own, long clock, String unit, String reject) {
        this.width = outSchema.fields().length;
        this.eventTypes = java.util.Arrays.stream(in.fields()).map(StructField::dataType).toArray(DataType[]::new);
        this.partitionAt = in.fieldIndex("partition");
        this.offsetAt = in.fieldIndex("offset");
        this.arrivalAt = in.fieldIndex("arrival_us");
        this.eventAt = in.fieldIndex("event_us");
        this.unitAt = unit == null ? -1 : in.fieldIndex(unit);
        this.rejectAt = reject == null ? -1 : in.fieldIndex(reject);
        this.badSeqAt = outSchema.fieldIndex("_bad_seq");
        this.states = states;
        this.job = job;
        this.own = own;
        this.clock = clock;
    }

    /**
     * The judged batch. {@code events} must already hold whole log partitions per Spark
     * partition; {@code outSchemaJson} is the schema the Python stage declares; {@code
     * statesJson} the previous states, {"partitions": [[p, arrival_wm, last_arrival], ...],
     * "units": [[p, unit, max_system], ...]} with null for "none yet"; {@code policiesJson} the
     * partitions judged by their own input's policy, {"p": [ooo, oooDrop, late, lateDrop, early|null]}.
     */
    public static Dataset<Row> apply(Dataset<Row> events, String outSchemaJson, String statesJson, long ooo,
                                     boolean oooDrop, long late, boolean lateDrop, boolean hasEarly, long early,
                                     boolean hasClock, long clock, String unitColumn, String rejectColumn,
                                     String policiesJson)
            throws java.io.IOException {
        StructType out = (StructType) DataType.fromJson(outSchemaJson);
        Tolerances job = new Tolerances(ooo, oooDrop, late, lateDrop, hasEarly ? early : NONE);
        PolicyScan scan = new PolicyScan(events.schema(), out, parseStates(statesJson), job,
                                         parsePolicies(policiesJson), hasClock ? clock : NONE, unitColumn,
                                         rejectColumn);
        // over the internal rows of the events' plan, as a DataFrame of those rows: no encoder either way
        org.apache.spark.sql.classic.Dataset<Row> classic = (org.apache.spark.sql.classic.Dataset<Row>) events;
        RDD<InternalRow> judged = classic.queryExecution().toRdd().toJavaRDD().mapPartitions(scan).rdd();
        return classic.sparkSession().internalCreateDataFrame(judged, out, false);
    }

    static Map<Integer, Tolerances> parsePolicies(String json) throws java.io.IOException {
        Map<Integer, Tolerances> own = new HashMap<>();
        JsonNode root = new ObjectMapper().readTree(json);
        root.fields().forEachRemaining(e -> {
            JsonNode t = e.getValue();
            own.put(Integer.parseInt(e.getKey()), new Tolerances(t.get(0).asLong(), t.get(1).asBoolean(),
                t.get(2).asLong(), t.get(3).asBoolean(), t.get(4).isNull() ? NONE : t.get(4).asLong()));
        });
        return own;
    }

    static Map<Integer, PartitionState> parseStates(String json) throws java.io.IOException {
        JsonNode root = new ObjectMapper().readTree(json);
        Map<Integer, PartitionState> states = new HashMap<>();
        for (JsonNode r : root.get("partitions")) {
            PartitionState s = states.computeIfAbsent(r.get(0).asInt(), p -> new PartitionState());
            s.arrivalWatermark = r.get(1).isNull() ? NONE : r.get(1).asLong();
            s.lastArrival = r.get(2).isNull() ? NONE : r.get(2).asLong();
        }
        for (JsonNode r : root.get("units")) {
            PartitionState s = states.computeIfAbsent(r.get(0).asInt(), p -> new PartitionState());
            s.maxSystem.put(r.get(1).isNull() ? null : r.get(1).asText(), r.get(2).asLong());
        }
        return states;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> input) {
        TreeMap<Integer, List<InternalRow>> byPartition = new TreeMap<>();
        while (input.hasNext()) {
            InternalRow r = input.next().copy();  // the reader reuses its row
            byPartition.computeIfAbsent(r.getInt(partitionAt), p -> new ArrayList<>()).add(r);
        }
        List<InternalRow> events = new ArrayList<>();
        List<InternalRow> stateRows = new ArrayList<>();
        List<InternalRow> counts = new ArrayList<>();
        for (Map.Entry<Integer, List<InternalRow>> part : byPartition.entrySet()) {
            int p = part.getKey();
            List<InternalRow> rows = part.getValue();
            rows.sort(Comparator.comparingLong(r -> r.getLong(offsetAt)));
            Tolerances tol = own.getOrDefault(p, job);
            PartitionState prev = states.get(p);
            PartitionState state = prev == null ? new PartitionState() : prev.copy();
            long[] c = new long[Count.values().length];
            List<InternalRow> judged = new ArrayList<>(rows.size());
            for (InternalRow r : rows) {
                if (r.getLong(offsetAt) == HEARTBEAT_OFFSET) continue;
                if (rejectAt >= 0 && !r.isNullAt(rejectAt)) {
                    InternalRow bad = eventRow(BAD_INPUT, r, null);
                    bad.update(badSeqAt, (int) c[Count.QUARANTINED.ordinal()]++);
                    events.add(bad);
                } else {
                    judged.add(r);
                }
            }
            long arrivalBefore = NONE;
            for (InternalRow r : judged) {
                long a = r.getLong(arrivalAt);
                if (a < arrivalBefore) {
                    throw new IllegalStateException(
                        "events of log partition " + p + " are not in arrival order (offset " + r.getLong(offsetAt)
                        + " arrived before the event ahead of it): the policy needs arrival times that never "
                        + "decrease with the offset; check the source that wrote the log");
                }
                arrivalBefore = a;
                events.add(eventRow(EVENT, r, judge(tol, state, r, a, c)));
            }
            if (!judged.isEmpty()) state.lastArrival = arrivalBefore;
            if (clock != NONE && clock - tol.late > state.arrivalWatermark) {  // semantics §2 idle units
                state.arrivalWatermark = clock - tol.late;
            }
            stateRows.addAll(stateRows(p, state));
            counts.add(countRow(p, c));
        }
        events.addAll(stateRows);
        events.addAll(counts);
        return events.iterator();
    }

    /** Steps 1–4 of semantics §2 for one event; updates {@code state} and the counts. */
    private Object[] judge(Tolerances tol, PartitionState state, InternalRow r, long a, long[] c) {
        final long ooo = tol.ooo, late = tol.late, early = tol.early;
        final boolean oooDrop = tol.oooDrop, lateDrop = tol.lateDrop;
        long e = r.getLong(eventAt);
        String unit = unitAt >= 0 && !r.isNullAt(unitAt) ? r.getUTF8String(unitAt).toString() : null;
        boolean isEarly = early != NONE && e - a > early;
        // an arrival before the clock an earlier batch was judged with counts as at that clock
        // (the core's step 2: adjusted up to the watermark the clock set, never behind it)
        long judged = state.arrivalWatermark == NONE ? a : Math.max(a, state.arrivalWatermark + late);
        boolean isLate = !isEarly && judged - e > late;
        long s0 = isLate ? judged - late : e;
        boolean lateDropped = isLate && lateDrop;
        boolean eligible = !isEarly && !lateDropped;
        Long known = state.maxSystem.get(unit);
        long prevMax = known == null ? NONE : known;
        long floor = prevMax == NONE ? NONE : prevMax - ooo;
        boolean outOfOrder = eligible && prevMax != NONE && s0 < floor;
        boolean oooDropped = outOfOrder && oooDrop;
        long maxAfter = eligible ? Math.max(prevMax, s0) : prevMax;
        if (maxAfter != NONE) state.maxSystem.put(unit, maxAfter);
        boolean dropped = isEarly || lateDropped || oooDropped;
        byte action = dropped ? DROPPED : (isLate || outOfOrder) ? ADJUSTED : KEPT;
        byte reason = isEarly ? EARLY : isLate && outOfOrder ? LATE_AND_OUT_OF_ORDER : isLate ? LATE
            : outOfOrder ? OUT_OF_ORDER : NO_REASON;
        Long system = dropped ? null : outOfOrder ? floor : s0;
        state.arrivalWatermark = Math.max(state.arrivalWatermark, a - late);
        long watermark = Math.max(state.arrivalWatermark, maxAfter == NONE ? NONE : maxAfter - ooo);
        count(c, action, reason);
        return new Object[] {action, reason, system, watermark};
    }

    /** The counts of semantics §5, as {@code policy_stage.outcome_counts} names them. */
    enum Count {
        JUDGED, KEPT, ADJUSTED, DROPPED, EARLY_DROPPED, LATE_ADJUSTED, LATE_DROPPED, OUT_OF_ORDER_ADJUSTED,
        OUT_OF_ORDER_DROPPED, QUARANTINED
    }

    private static void count(long[] c, byte action, byte reason) {
        c[Count.JUDGED.ordinal()]++;
        c[(action == KEPT ? Count.KEPT : action == ADJUSTED ? Count.ADJUSTED : Count.DROPPED).ordinal()]++;
        boolean isLate = reason == LATE || reason == LATE_AND_OUT_OF_ORDER;
        boolean isOoo = reason == OUT_OF_ORDER || reason == LATE_AND_OUT_OF_ORDER;
        if (reason == EARLY) c[Count.EARLY_DROPPED.ordinal()]++;
        if (isLate) c[(action == ADJUSTED ? Count.LATE_ADJUSTED : Count.LATE_DROPPED).ordinal()]++;
        if (isOoo) c[(action == ADJUSTED ? Count.OUT_OF_ORDER_ADJUSTED : Count.OUT_OF_ORDER_DROPPED).ordinal()]++;
    }

    private InternalRow eventRow(UTF8String kind, InternalRow r, Object[] outcome) {
        if (getters == null) getters = accessors(eventTypes);
        Object[] v = new Object[width];
        v[0] = kind;
        for (int i = 0; i < eventTypes.length; i++) v[1 + i] = getters[i].apply(r, i);
        if (outcome != null) System.arraycopy(outcome, 0, v, 1 + eventTypes.length, outcome.length);
        return new GenericInternalRow(v);
    }

    /** A reader per column of these types, chosen once: {@code InternalRow.get(i, type)} looks
     * the type up, and asks the SQL settings about it, on every call. */
    @SuppressWarnings("unchecked")
    private static scala.Function2<SpecializedGetters, Object, Object>[] accessors(DataType[] types) {
        scala.Function2<SpecializedGetters, Object, Object>[] out = new scala.Function2[types.length];
        for (int i = 0; i < types.length; i++) out[i] = InternalRow$.MODULE$.getAccessor(types[i], true);
        return out;
    }

    /** The state rows of one partition, laid out as {@code policy_stage.state_rows}: s_partition,
     * s_is_unit, s_unit, s_max_system_us, s_arrival_watermark_us, s_last_arrival_us. */
    private List<InternalRow> stateRows(int p, PartitionState s) {
        List<InternalRow> out = new ArrayList<>();
        out.add(stateRow(p, false, null, null, opt(s.arrivalWatermark), opt(s.lastArrival)));
        TreeSet<String> named = new TreeSet<>();
        for (String unit : s.maxSystem.keySet()) if (unit != null) named.add(unit);
        if (s.maxSystem.containsKey(null)) out.add(stateRow(p, true, null, s.maxSystem.get(null), null, null));
        for (String unit : named) out.add(stateRow(p, true, unit, s.maxSystem.get(unit), null, null));
        return out;
    }

    private InternalRow stateRow(int p, boolean isUnit, String unit, Long maxSystem, Long arrivalWm, Long lastArrival) {
        Object[] v = new Object[width];
        int at = 1 + eventTypes.length + 4;
        v[0] = STATE;
        v[at] = p;
        v[at + 1] = isUnit;
        v[at + 2] = unit == null ? null : UTF8String.fromString(unit);
        v[at + 3] = maxSystem;
        v[at + 4] = arrivalWm;
        v[at + 5] = lastArrival;
        return new GenericInternalRow(v);
    }

    private InternalRow countRow(int p, long[] c) {
        StringBuilder json = new StringBuilder("{\"partition\": ").append(p);
        for (Count k : Count.values()) {
            json.append(", \"").append(k.name().toLowerCase()).append("\": ").append(c[k.ordinal()]);
        }
        Object[] v = new Object[width];
        v[0] = COUNTS;
        v[v.length - 1] = UTF8String.fromString(json.append('}').toString());
        return new GenericInternalRow(v);
    }

    private static Long opt(long v) {
        return v == NONE ? null : v;
    }
}
