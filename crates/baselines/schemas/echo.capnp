# Echo message shapes for the Cap'n Proto baseline.
@0xbe5b1ed015ade516;

# (a) One bytes field.
struct Single {
  id @0 :UInt32;
  val @1 :Data;
}

# (b) A list of K bytes fields.
struct ListMsg {
  id @0 :UInt32;
  vals @1 :List(Data);
}

# (c) A full binary tree: interior nodes have both children, leaves have
# neither and hold the bytes.
struct Node {
  left @0 :Node;
  right @1 :Node;
  val @2 :Data;
}

struct Tree {
  id @0 :UInt32;
  root @1 :Node;
}
