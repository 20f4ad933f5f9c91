"""How a store is reached: from the environment, rendered for Hadoop S3A and pyarrow, the secret never shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tidegate.errors import ConfigError
from tidegate.storage.aws import arrow_filesystem
from tidegate.storage.s3 import DEFAULT_CHAIN_PROVIDER, SESSION_PROVIDER, SIMPLE_PROVIDER, S3Credentials, S3Settings

SECRET = "s3cr3t-never-shown"


def local_store(**more) -> S3Settings:
    return S3Settings(endpoint="http://127.0.0.1:8333", credentials=S3Credentials("tidegate", SECRET), **more)


def test_the_secret_key_is_never_in_repr_or_str():
    token = S3Credentials("AKIDEXAMPLE", SECRET, "session-token-xyz")
    settings = S3Settings(credentials=token)
    for shown in (repr(settings), str(settings), repr(token), str(token)):
        assert SECRET not in shown and "session-token-xyz" not in shown
    assert "AKIDEXAMPLE" in repr(settings)


def test_an_s3_compatible_endpoint_is_path_style_over_plain_http():
    conf = local_store().hadoop_conf()
    assert conf["fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["fs.s3a.path.style.access"] == "true"
    assert conf["fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["fs.s3a.endpoint.region"] == "us-east-1"
    assert conf["fs.s3a.access.key"] == "tidegate" and conf["fs.s3a.secret.key"] == SECRET
    assert conf["fs.s3a.aws.credentials.provider"] == SIMPLE_PROVIDER


def test_aws_itself_is_virtual_hosted_over_tls_and_uses_the_default_chain_without_keys():
    conf = S3Settings(region="eu-west-1").hadoop_conf()
    assert "fs.s3a.endpoint" not in conf
    assert conf["fs.s3a.path.style.access"] == "false" and conf["fs.s3a.connection.ssl.enabled"] == "true"
    assert conf["fs.s3a.endpoint.region"] == "eu-west-1"
    # no keys: the AWS SDK's whole default chain (web identity and profiles too), as botocore's on the Python side
    assert not any(k.endswith(("access.key", "secret.key")) for k in conf)
    assert conf["fs.s3a.aws.credentials.provider"] == DEFAULT_CHAIN_PROVIDER


@pytest.mark.parametrize(
    ("settings", "url"),
    [
        # an S3-compatible endpoint: the bucket in the path, as S3A is told too
        (local_store(), "http://127.0.0.1:8333/tidegate-east/k"),
        # AWS itself: the bucket in the host name
        (S3Settings(region="eu-west-1", credentials=S3Credentials("id", SECRET)), "https://tidegate-east.s3"),
        # an endpoint told to address buckets by host name
        (
            S3Settings(endpoint="http://s3.test:9000", path_style=False, credentials=S3Credentials("id", SECRET)),
            "http://tidegate-east.s3.test:9000/k",
        ),
    ],
)
def test_botocore_addresses_buckets_as_the_settings_say(settings, url):
    from tidegate.storage import aws

    class Sent(Exception):
        pass

    def stop(request, **_):
        raise Sent(request.url)

    s3 = aws.client(settings, attempts=1)
    s3.meta.events.register("before-send.s3.PutObject", stop)
    try:
        with pytest.raises(Sent) as sent:
            s3.put_object(Bucket="tidegate-east", Key="k", Body=b"x", IfNoneMatch="*")
    finally:
        s3.meta.events.unregister("before-send.s3.PutObject", stop)
    assert str(sent.value).startswith(url)


def test_temporary_credentials_use_the_session_provider():
    conf = S3Settings(credentials=S3Credentials("id", SECRET, "tok")).hadoop_conf()
    assert conf["fs.s3a.session.token"] == "tok" and conf["fs.s3a.aws.credentials.provider"] == SESSION_PROVIDER


def test_per_bucket_settings_let_one_session_reach_two_stores():
    east = local_store().spark_conf("tidegate-east")
    west = S3Settings(endpoint="http://127.0.0.1:9444").spark_conf("tidegate-west")
    assert east["spark.hadoop.fs.s3a.bucket.tidegate-east.endpoint"] == "http://127.0.0.1:8333"
    assert west["spark.hadoop.fs.s3a.bucket.tidegate-west.endpoint"] == "http://127.0.0.1:9444"
    assert all(k.startswith("spark.hadoop.fs.s3a.bucket.tidegate-east.") for k in east)


def test_retries_and_timeouts_are_bounded():
    conf = local_store(connect_timeout_s=2, attempts=3).hadoop_conf()
    assert conf["fs.s3a.connection.establish.timeout"] == "15000ms"  # S3A's floor, said rather than warned
    assert local_store(connect_timeout_s=20).hadoop_conf()["fs.s3a.connection.establish.timeout"] == "20000ms"
    assert conf["fs.s3a.attempts.maximum"] == "2" and conf["fs.s3a.retry.limit"] == "2"


def test_from_env_a_region_s_own_keys_win_over_the_shared_ones_and_aws_s():
    env = {
        "TIDEGATE_S3_ENDPOINT": "http://127.0.0.1:1111",
        "TIDEGATE_S3_EAST_ENDPOINT": "http://127.0.0.1:2222",
        "TIDEGATE_S3_EAST_ACCESS_KEY_ID": "east-id",
        "TIDEGATE_S3_EAST_SECRET_ACCESS_KEY": "east-secret",
        "AWS_ACCESS_KEY_ID": "aws-id",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "AWS_REGION": "eu-central-1",
        "TIDEGATE_S3_ATTEMPTS": "4",
    }
    east = S3Settings.from_env("east", env)
    assert east.endpoint == "http://127.0.0.1:2222" and east.credentials.access_key_id == "east-id"
    assert east.region == "eu-central-1" and east.attempts == 4
    west = S3Settings.from_env("west", env)
    assert west.endpoint == "http://127.0.0.1:1111" and west.credentials.access_key_id == "aws-id"


def test_from_env_without_keys_leaves_them_to_the_instance_role():
    settings = S3Settings.from_env("east", {"TIDEGATE_S3_REGION": "us-west-2"})
    assert settings.credentials is None and settings.endpoint is None and settings.region == "us-west-2"
    assert "instance role" in str(settings)


@pytest.mark.parametrize(
    "env, says",
    [
        ({"TIDEGATE_S3_ACCESS_KEY_ID": "only-the-id"}, "without its secret"),
        ({"TIDEGATE_S3_PATH_STYLE": "maybe"}, "is not true or false"),
        ({"TIDEGATE_S3_ATTEMPTS": "many"}, "is not a number"),
        ({"TIDEGATE_S3_ENDPOINT": "127.0.0.1:8333"}, "is not an http(s)://host[:port] URL"),
        ({"TIDEGATE_S3_ENDPOINT": "http://id:key@127.0.0.1:8333"}, "carries credentials"),
        ({"TIDEGATE_S3_ENDPOINT": "http://127.0.0.1:8333/bucket"}, "has a path"),
    ],
)
def test_from_env_refuses_what_it_cannot_use(env, says):
    with pytest.raises(ConfigError) as refused:
        S3Settings.from_env("east", env)
    assert says in str(refused.value)
    assert "key@" not in str(refused.value)


def test_a_pyarrow_filesystem_for_the_store():
    fs = arrow_filesystem(local_store(attempts=1))
    assert fs.region == "us-east-1"
    assert type(fs).__name__ == "S3FileSystem"
    assert SECRET not in repr(fs)


def test_the_storage_modules_import_neither_pyspark_nor_pyarrow():
    probe = (
        "import sys, tidegate.storage.uri, tidegate.storage.s3, tidegate.storage.spark, "
        "tidegate.storage.seaweedfs; print(sorted(m for m in ('pyspark', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
