"""Reads {"descriptor_set": path, "cases": [{"type": name, "json": text}]} on stdin; prints,
per case, protobuf's own reading of the JSON written back with proto field names ("proto")
and with its default lowerCamelCase names ("camel"), or the error it gave ("error")."""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

req = json.load(sys.stdin)
fds = descriptor_pb2.FileDescriptorSet()
with open(req["descriptor_set"], "rb") as f:
    fds.ParseFromString(f.read())
pool = descriptor_pool.DescriptorPool()
for fd in fds.file:
    pool.Add(fd)
out = []
for case in req["cases"]:
    try:
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(case["type"]))
        m = json_format.Parse(case["json"], cls(), descriptor_pool=pool)
        out.append({
            "proto": json_format.MessageToJson(
                m, preserving_proto_field_name=True, descriptor_pool=pool),
            "camel": json_format.MessageToJson(m, descriptor_pool=pool),
        })
    except Exception as e:  # what json_format refused, reported to the test
        out.append({"error": f"{type(e).__name__}: {e}"})
json.dump(out, sys.stdout)
