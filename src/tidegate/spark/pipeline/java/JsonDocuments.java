package tidegate.jvm;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.json.JacksonParser$;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Each row's payload read as a JSON document on the executors: the value {@code
 * from_json(payload, schema, options)} gives, by Spark's own parser ({@code JacksonParser}
 * behind a {@code FailureSafeParser}, as {@code from_json} builds them), appended to the row.
 *
 * <p>Beside it, whether a payload that is not a document would be one without the nesting
 * limit: read again with {@code maxNestingDepth} raised, only when the first read failed. That
 * is the question the parse stage asks {@code from_json} a second time for; asked here, no
 * {@code from_json} is left in the stage's projection, and Spark compiles that projection into
 * the code that reads the rows instead of running it as a projection of its own.
 *
 * <p>What differs is how each payload reaches the parser. {@code from_json} hands Jackson a
 * {@code Reader} over the payload's bytes, and a reader costs a fresh 8 KiB decoding buffer and
 * a charset decoder for every row: three times the tokenizing of a payload of a few hundred
 * bytes. Here the payload is decoded to a string first, with the same replacement of malformed
 * UTF-8 that reader applies, and Jackson reads that string from its recycled buffers. The
 * tokens, and so every document, are the same.
 */
public final class JsonDocuments implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private final String schemaJson;  // the document's fields, the corrupt-record column among them
    private final HashMap<String, String> options;  // from_json's options
    private final String timeZone;
    private final String corruptDefault;  // the session's corrupt-record column, when the options name none
    private final int textAt;  // the column read as JSON
    private final long maxBytes;  // a longer text is not read: its document is null
    private final int relaxedDepth;  // the nesting limit of the second read

    private JsonDocuments(String schemaJson, HashMap<String, String> options, String timeZone, String corruptDefault,
                          int textAt, long maxBytes, int relaxedDepth) {
        this.schemaJson = schemaJson;
        this.options = options;
        this.timeZone = timeZone;
        this.corruptDefault = corruptDefault;
        this.textAt = textAt;
        this.maxBytes = maxBytes;
        this.relaxedDepth = relaxedDepth;
    }

    /**
     * {@code input} with two more columns: {@code name}, the document of {@code column} read
     * with {@code schemaJson} and {@code optionsJson} (from_json's, a JSON object of strings),
     * null where the text is null or longer than {@code maxBytes} bytes; and {@code deepName},
     * true where that document is null or corrupt but the text read with {@code maxNestingDepth}
     * set to {@code relaxedDepth} is a document.
     */
    public static Dataset<Row> apply(Dataset<Row> input, String column, String name, String schemaJson,
                                     String optionsJson, long maxBytes, String deepName, int relaxedDepth)
            throws java.io.IOException {
        HashMap<String, String> options = new HashMap<>();
        new ObjectMapper().readTree(optionsJson).fields()
            .forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
        org.apache.spark.sql.classic.Dataset<Row> classic = (org.apache.spark.sql.classic.Dataset<Row>) input;
        org.apache.spark.sql.internal.SQLConf conf = classic.sparkSession().sessionState().conf();
        JsonDocuments read = new JsonDocuments(schemaJson, options, conf.sessionLocalTimeZone(),
                                               conf.columnNameOfCorruptRecord(), input.schema().fieldIndex(column),
                                               maxBytes, relaxedDepth);
        StructType out = input.schema()
            .add(new StructField(name, DataType.fromJson(schemaJson), true, org.apache.spark.sql.types.Metadata.empty()))
            .add(new StructField(deepName, org.apache.spark.sql.types.DataTypes.BooleanType, false,
                                 org.apache.spark.sql.types.Metadata.empty()));
        RDD<InternalRow> rows = classic.queryExecution().toRdd().toJavaRDD().mapPartitions(read).rdd();
        return classic.sparkSession().internalCreateDataFrame(rows, out, false);
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
        StructType schema = (StructType) DataType.fromJson(schemaJson);
        FailureSafeParser<UTF8String> parser = parser(schema, options);
        HashMap<String, String> relaxed = new HashMap<>(options);
        relaxed.put("maxNestingDepth", Integer.toString(relaxedDepth));
        FailureSafeParser<UTF8String> relaxedParser = parser(schema, relaxed);
        int corruptAt = schema.fieldIndex(corruptColumn(options));
        GenericInternalRow added = new GenericInternalRow(2);  // the document, and whether it is only too deep
        JoinedRow joined = new JoinedRow();  // the next operator copies each row before it asks for another
        return new Iterator<>() {
            @Override
            public boolean hasNext() {
                return rows.hasNext();
            }

            @Override
            public InternalRow next() {
                InternalRow row = rows.next();
                UTF8String text = row.isNullAt(textAt) ? null : row.getUTF8String(textAt);
                boolean read = text != null && text.numBytes() <= maxBytes;
                InternalRow document = read ? read(parser, text) : null;
                boolean deep = false;
                if (read && (document == null || !document.isNullAt(corruptAt))) {
                    InternalRow again = read(relaxedParser, text);
                    deep = again != null && again.isNullAt(corruptAt);  // each parser fills a row of its own
                }
                added.update(0, document);
                added.update(1, deep);
                return joined.apply(row, added);
            }
        };
    }

    private String corruptColumn(Map<String, String> options) {
        return options.getOrDefault("columnNameOfCorruptRecord", corruptDefault);
    }

    private static InternalRow read(FailureSafeParser<UTF8String> parser, UTF8String text) {
        scala.collection.Iterator<InternalRow> documents = parser.parse(text);
        return documents.hasNext() ? documents.next() : null;
    }

    /** The parser {@code from_json} builds for this schema and these options, per task. */
    private FailureSafeParser<UTF8String> parser(StructType schema, Map<String, String> options) {
        JSONOptions parsed = new JSONOptions(scalaMap(options), timeZone, corruptDefault);
        String corrupt = parsed.columnNameOfCorruptRecord();
        StructType fields = new StructType(java.util.Arrays.stream(schema.fields())
            .filter(f -> !f.name().equals(corrupt)).toArray(StructField[]::new));
        JacksonParser jackson = new JacksonParser(fields, parsed, false, JacksonParser$.MODULE$.$lessinit$greater$default$4());
        scala.Function2<com.fasterxml.jackson.core.JsonFactory, UTF8String, com.fasterxml.jackson.core.JsonParser> open =
            (factory, text) -> {
                try {
                    return factory.createParser(text.toString());  // String(bytes, UTF_8): malformed bytes replaced
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            };
        scala.Function1<UTF8String, UTF8String> literal = text -> text;
        return new FailureSafeParser<>(text -> jackson.parse(text, open, literal), parsed.parseMode(), schema, corrupt);
    }

    private static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> map) {
        scala.collection.immutable.Map<String, String> out = scala.collection.immutable.Map$.MODULE$.empty();
        for (Map.Entry<String, String> e : map.entrySet()) out = out.updated(e.getKey(), e.getValue());
        return out;
    }
}
