package tidegate.jvm;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The embedded event log as a Spark source read on the JVM, streaming or batch: no Python
 * process per query and no Arrow hand-over from Python workers. Planning calls back into the
 * driver's Python ({@link LogPlanner}); executors read the log's frames themselves.
 */
public final class LogSourceProvider implements TableProvider {
    static final StructType SCHEMA = new StructType()
        .add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType)
        .add("arrival_time", DataTypes.TimestampType)
        .add("key", DataTypes.StringType)
        .add("payload", DataTypes.StringType);
    static final MapType HEADERS = DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true);
    static final StructType WITH_HEADERS = SCHEMA.add("headers", HEADERS);  // includeHeaders: true

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return options.getBoolean("includeHeaders", false) ? WITH_HEADERS : SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new LogTable(LogPlanners.get(new CaseInsensitiveStringMap(properties).get("planner")), schema);
    }

    /** The table is its own scan: nothing to push down, one schema, one stream or batch per read. */
    private static final class LogTable implements SupportsRead, Scan {
        // held by the read's plan: a batch read's planner lives as long as the DataFrames made of it
        private final LogPlanner planner;
        private final StructType schema;  // with headers when the read includes them

        LogTable(LogPlanner planner, StructType schema) {
            this.planner = planner;
            this.schema = schema;
        }

        @Override
        public String name() {
            return "tidegate-log";
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return () -> this;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "tidegate event log";
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return new LogStream(planner);
        }

        @Override
        public Batch toBatch() {
            return new Batch() {
                @Override
                public InputPartition[] planInputPartitions() {
                    return LogStream.ranges(LogStream.answer(planner.planBatch("batch")));
                }

                @Override
                public PartitionReaderFactory createReaderFactory() {
                    return new LogReaderFactory();
                }
            };
        }
    }
}
