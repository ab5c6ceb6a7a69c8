# The key-value store's messages for the Cap'n Proto baseline (apps/kv-store, paper §6.2).
# `op` is the KV store's message type (1 get ... 8 delete); unused fields stay empty.
@0xd1f3a8c2b4e5f607;

struct KvRequest {
  id @0 :UInt32;
  op @1 :UInt16;
  keys @2 :List(Text);
  vals @3 :List(Data);
  index @4 :UInt32;
}

struct KvResponse {
  id @0 :UInt32;
  # The status numbers of schemas/kv.proto (0 OK, 1 NOT_FOUND, ...).
  status @1 :Int32;
  vals @2 :List(Data);
  # getm: one status per key.
  statuses @3 :List(Int32);
}
