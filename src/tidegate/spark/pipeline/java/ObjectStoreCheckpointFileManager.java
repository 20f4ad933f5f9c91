package tidegate.jvm;

import java.io.IOException;
import java.util.Locale;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;

import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * Spark's streaming checkpoint (offsets, commits, sources, state) on an object store, committed
 * without a rename.
 *
 * <p>Spark writes every checkpoint file through {@code createAtomic}; its own managers make that
 * atomic by writing a temporary file and renaming it. Through S3A a rename is a copy and a delete,
 * and "no overwrite" is a look before the copy: two writers of batch N can both succeed. Here a file
 * that must not be overwritten goes straight to its key as a conditional put ({@code If-None-Match: *}):
 * the object appears whole at {@code close()} or not at all (a writer killed before it leaves nothing),
 * and a second writer is refused at {@code close()} with {@link FileAlreadyExistsException}, which Spark
 * reports as two queries sharing one checkpoint. {@code cancel()} aborts the upload. A file Spark may
 * overwrite is one plain put: S3 replaces an object whole.
 *
 * <p>Everything else (open, list, mkdirs, exists, delete) is Spark's default manager for the path. So
 * is every write on a filesystem without conditional puts whose rename is atomic (a local disk, HDFS),
 * since one session may checkpoint there too. An {@code s3a://} store without conditional puts is
 * refused when the manager is made: falling back would bring the copy-and-delete back.
 */
public final class ObjectStoreCheckpointFileManager implements CheckpointFileManager {
    /** S3A's put-if-absent: the builder option, and the path capability saying the store has it. */
    static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";
    /** Skip S3A's existence probes before a write: the conditional put is the one check that counts. */
    static final String CREATE_PERFORMANCE = "fs.s3a.create.performance";
    /** The Spark setting that names this class; unset to ask Spark for its own default. */
    static final String MANAGER_CLASS = "spark.sql.streaming.checkpointFileManagerClass";

    private final CheckpointFileManager spark;
    private final FileSystem fs;
    private final boolean conditional;

    public ObjectStoreCheckpointFileManager(Path path, Configuration conf) throws IOException {
        Configuration sparkDefault = new Configuration(conf);
        sparkDefault.unset(MANAGER_CLASS);
        this.spark = CheckpointFileManager.create(path, sparkDefault);
        this.fs = path.getFileSystem(conf);
        this.conditional = fs.hasPathCapability(path, CONDITIONAL_CREATE);
        if (!conditional && fs.getScheme().toLowerCase(Locale.ROOT).startsWith("s3")) {
            throw new IOException("Spark's checkpoint at " + path + ": this store takes no conditional puts ("
                + CONDITIONAL_CREATE + " is not a capability of the path), and committing a checkpoint file by "
                + "copy and delete lets two writers of one batch both succeed; set fs.s3a.create.conditional.enabled"
                + "=true for the bucket, or use a store that takes If-None-Match on PUT");
        }
    }

    /** True when writes that must not overwrite go to the store as conditional puts. */
    public boolean conditionalPuts() {
        return conditional;
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (!conditional) {
            return spark.createAtomic(path, overwriteIfPossible);
        }
        try {
            FSDataOutputStreamBuilder<FSDataOutputStream, ?> put = fs.createFile(path);
            put.recursive().overwrite(overwriteIfPossible);
            put.opt(CREATE_PERFORMANCE, true);
            if (!overwriteIfPossible) {
                put.must(CONDITIONAL_CREATE, true);
            }
            return new DirectPut(path, put.build());
        } catch (IOException e) {
            throw sneaky(e);  // as Spark's own managers do: Scala declares no checked exceptions
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return spark.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return spark.list(path, filter);
    }

    @Override
    public FileStatus[] list(Path path) {
        return spark.list(path);
    }

    @Override
    public void mkdirs(Path path) {
        spark.mkdirs(path);
    }

    @Override
    public boolean exists(Path path) {
        return spark.exists(path);
    }

    @Override
    public void delete(Path path) {
        spark.delete(path);
    }

    @Override
    public boolean isLocal() {
        return spark.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        return spark.createCheckpointDirectory();
    }

    @Override
    public void close() {
        spark.close();
    }

    /** The object is written at its final key; it appears at close(), or never if cancelled. */
    private static final class DirectPut extends CancellableFSDataOutputStream {
        private final Path path;
        private final FSDataOutputStream upload;

        DirectPut(Path path, FSDataOutputStream upload) {
            super(upload);
            this.path = path;
            this.upload = upload;
        }

        @Override
        public void close() throws IOException {
            try {
                super.close();
            } catch (IOException e) {
                if (refusedAsPresent(e)) {
                    FileAlreadyExistsException present = new FileAlreadyExistsException(
                        path + " was written by another writer first (its conditional put was refused)");
                    present.initCause(e);
                    throw present;
                }
                throw e;
            }
        }

        @Override
        public void cancel() {
            upload.abort();  // S3A drops the buffered or multipart upload; harmless once closed
        }
    }

    /** S3A reports a refused If-None-Match (HTTP 412) as RemoteFileChangedException, a hadoop-aws class. */
    private static boolean refusedAsPresent(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof FileAlreadyExistsException
                || t.getClass().getName().equals("org.apache.hadoop.fs.s3a.RemoteFileChangedException")) {
                return true;
            }
        }
        return false;
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;
    }
}
