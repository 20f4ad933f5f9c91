"""Where a region keeps its lineages: a local folder or an S3 store.

:mod:`tidegate.storage.uri` parses a storage root; :mod:`tidegate.storage.store` is the one owner
of a lineage's file I/O (a local folder or an S3 store, with put-if-absent); :mod:`tidegate.storage.s3` holds how to
reach an S3 store (Hadoop S3A settings for Spark, a pyarrow filesystem for Python);
:mod:`tidegate.storage.spark` puts hadoop-aws on a Spark session; :mod:`tidegate.storage.seaweedfs`
runs a local S3-compatible store; :mod:`tidegate.storage.aws` holds botocore's credential chain
and the S3 client for the requests pyarrow cannot send. None of them imports pyspark.
"""
