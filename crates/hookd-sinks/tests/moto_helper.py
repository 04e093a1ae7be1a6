"""boto3, the AWS SDK for Python, as the AWS destination tests' second party: it prepares the
queues, topics and buckets on a moto server and reads back what the sinks wrote, so what
hookd sends is checked by a client it did not write.

Usage: python moto_helper.py ENDPOINT_URL '[["op", args...], ...]' -> a JSON list of results.
Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""

import json
import sys

import boto3

ENDPOINT = sys.argv[1]


def client(service):
    return boto3.client(service, endpoint_url=ENDPOINT, region_name="us-east-1")


def auth():
    """The IAM user with an allow-all policy whose key the sinks sign with: run first, while
    moto still takes calls without checking signatures (INITIAL_NO_AUTH_ACTION_COUNT=3)."""
    iam = client("iam")
    iam.create_user(UserName="hookd")
    key = iam.create_access_key(UserName="hookd")["AccessKey"]
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="hookd", PolicyName="all", PolicyDocument=json.dumps(policy))
    return {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}


def queue(name):
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    return client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]


def receive(url):
    """Every message in the queue, each deleted once read (a FIFO group is held while one of
    its messages is in flight)."""
    sqs = client("sqs")
    got = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=60,
            AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
        if not messages:
            return got
        for m in messages:
            got.append({
                "body": m["Body"],
                "attributes": {k: v["StringValue"]
                               for k, v in m.get("MessageAttributes", {}).items()},
                "system": m.get("Attributes", {}),
            })
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def topic(name):
    """A topic and a queue subscribed to it with raw delivery, so a message arrives as it
    was published (body and attributes)."""
    fifo = name.endswith(".fifo")
    arn = client("sns").create_topic(
        Name=name, Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
    url = queue(name.removesuffix(".fifo") + "-sub" + (".fifo" if fifo else ""))
    queue_arn = client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client("sns").subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn,
                            Attributes={"RawMessageDelivery": "true"})
    return {"arn": arn, "queue": url}


def bucket(name):
    client("s3").create_bucket(Bucket=name)
    return name


def objects(name):
    """Every object in the bucket: key -> (content type, body)."""
    s3 = client("s3")
    found = {}
    for entry in s3.list_objects_v2(Bucket=name).get("Contents", []):
        got = s3.get_object(Bucket=name, Key=entry["Key"])
        found[entry["Key"]] = {"type": got["ContentType"],
                               "body": got["Body"].read().decode("utf-8")}
    return found


OPS = {"auth": auth, "queue": queue, "receive": receive, "topic": topic, "bucket": bucket,
       "objects": objects}

print(json.dumps([OPS[op](*args) for op, *args in json.loads(sys.argv[2])]))
