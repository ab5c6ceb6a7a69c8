# Shell helpers of the C tests that run a kernel-bypass datapath on a veth pair between two
# network namespaces (sourced by crates/cornflakes-c/tests/c/run.sh and
# apps/redis-cornflakes/test/run.sh; the Rust tests' equivalent is crates/netns-harness). A
# step that cannot run is reported with scripts/skip.sh's `skip`.
#
#   cf_xdp_why                     prints why AF_XDP on veth cannot run here (root, ip, ethtool,
#                                  libbpf and clang, the kernel's AF_XDP); nothing when it can.
#   cf_veth_pair TAG N             creates namespaces cfc-$$-TAG-a/-b joined by a veth pair:
#                                  A's end has no kernel address (the datapath's IP_A=10.83.N.1),
#                                  B's is IP_B=10.83.N.2/24 with software checksums; sets NS_A
#                                  NS_B IF_A IF_B IP_A IP_B MAC_B. cf_veth_cleanup deletes every
#                                  pair made (the caller traps EXIT with it).

cf_xdp_why() {
  if [ "$(id -u)" != 0 ]; then
    echo "not running as root (network namespaces, veth and AF_XDP need it)"
  elif ! ip -V >/dev/null 2>&1; then
    echo "the \`ip\` command (iproute2) is missing"
  elif ! ethtool --version >/dev/null 2>&1; then
    echo "the \`ethtool\` command is missing"
  elif ! pkg-config --exists libbpf 2>/dev/null || ! command -v clang >/dev/null; then
    echo "libbpf-dev or clang is missing (crates/datapath-xdp/APT_PACKAGES)"
  elif ! python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW)' 2>/dev/null; then
    echo "the kernel refuses an AF_XDP socket"
  fi
}

CF_VETH_NAMESPACES=()
cf_veth_pair() {
  NS_A="cfc-$$-$1-a" NS_B="cfc-$$-$1-b" IF_A="cc$$$1a" IF_B="cc$$$1b"
  IP_A="10.83.$2.1" IP_B="10.83.$2.2"
  CF_VETH_NAMESPACES+=("$NS_A" "$NS_B")
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$IF_A" netns "$NS_A" type veth peer name "$IF_B" netns "$NS_B"
  local ns ifn
  for ns in "$NS_A" "$NS_B"; do
    ifn=$IF_A
    [ "$ns" = "$NS_B" ] && ifn=$IF_B
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$ifn" mtu 1500 up
  done
  ip -n "$NS_B" addr add "$IP_B/24" dev "$IF_B"
  ip netns exec "$NS_B" ethtool -K "$IF_B" tx off >/dev/null
  MAC_B=$(ip -n "$NS_B" -o link show "$IF_B" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
}

cf_veth_cleanup() {
  local ns
  for ns in "${CF_VETH_NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
