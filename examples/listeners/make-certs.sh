#!/usr/bin/env bash
# Certificates for the three-listener example (openssl only).
#
#   examples/listeners/make-certs.sh [DIR]     (DIR defaults to examples/listeners/certs)
#
# Uses the example CA of examples/make-certs.sh (made first if missing) and
# issues one server certificate per TLS listener, so each listener presents
# its own identity:
#   external.keystore.pem      CN=external     SAN IP:127.0.0.1, DNS:external.localhost
#   replication.keystore.pem   CN=replication  SAN DNS:localhost, IP:127.0.0.1
#                              (also the broker's inter-broker client identity)
# and a client certificate for tools talking to REPLICATION:
#   peer.keystore.pem          CN=peer-broker
# Keystores are PEM files holding the PKCS#8 key and the chain
# (ssl.keystore.type=PEM).  Valid 30 days; for test setups only.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-"$here/certs"}
ca_dir="$here/../certs"
days=30

if [ ! -f "$ca_dir/ca.pem" ] || [ ! -f "$ca_dir/ca.key" ]; then
    "$here/../make-certs.sh" "$ca_dir"
fi
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$ca_dir/ca.pem" "$dir/ca.pem"

# leaf NAME SUBJECT EXTENSIONS
leaf() {
    local name=$1 subject=$2 ext=$3
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$work/$name.key" \
        -out "$work/$name.csr" -subj "$subject" 2>/dev/null
    printf '%b' "$ext" > "$work/$name.ext"
    openssl x509 -req -sha256 -days "$days" -in "$work/$name.csr" \
        -CA "$ca_dir/ca.pem" -CAkey "$ca_dir/ca.key" -CAcreateserial \
        -CAserial "$work/ca.srl" -out "$dir/$name.pem" -extfile "$work/$name.ext" 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in "$work/$name.key" -out "$work/$name.pk8"
    cat "$work/$name.pk8" "$dir/$name.pem" "$ca_dir/ca.pem" > "$dir/$name.keystore.pem"
    chmod 600 "$dir/$name.keystore.pem"
}

server_ext="basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n"
leaf external "/CN=external" "${server_ext}subjectAltName=IP:127.0.0.1,DNS:external.localhost\n"
leaf replication "/CN=replication" "${server_ext}subjectAltName=DNS:localhost,IP:127.0.0.1\n"
leaf peer "/CN=peer-broker" \
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"

openssl verify -CAfile "$dir/ca.pem" "$dir/external.pem" "$dir/replication.pem" "$dir/peer.pem" >/dev/null
echo "Certificates written to $dir"
