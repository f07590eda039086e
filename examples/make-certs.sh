#!/usr/bin/env bash
# Make a throwaway PKI for the example configurations (openssl only).
#
#   examples/make-certs.sh [DIR]        (DIR defaults to examples/certs)
#   KEY_TYPE=rsa examples/make-certs.sh  RSA-2048 keys instead of ECDSA P-256
#
# Keys are ECDSA P-256 by default: a TLS handshake signs with the server's
# key (and, with client certificates, the client's), and a P-256 signature
# costs a fraction of an RSA-2048 one, which shows in connection storms.
# Kafka (Java) and librdkafka accept both.
#
# Creates in DIR:
#   ca.pem, ca.key                 a self-signed CA (CN=kchannel-example-ca)
#   server.pem, server.key         server certificate for localhost / 127.0.0.1
#                                  (SAN DNS:localhost, IP:127.0.0.1), PKCS#8 key
#   server.keystore.pem            server key + certificate chain in one PEM file
#                                  (ssl.keystore.type=PEM)
#   server.p12                     the same as a PKCS12 keystore
#   client.pem, client.key         client certificate (CN=client,OU=Eng,O=Example,C=US)
#   client.keystore.pem, client.p12
#   truststore.p12                 PKCS12 truststore holding the CA
# PKCS12 files are protected by the password "kchannel-example".
#
# The certificates are valid for 30 days.  Never use them outside a test setup.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-"$here/certs"}
pass=kchannel-example
days=30
key_type=${KEY_TYPE:-ec}
case "$key_type" in
    ec)  newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256); leaf_usage=digitalSignature ;;
    rsa) newkey=(-newkey rsa:2048); leaf_usage=digitalSignature,keyEncipherment ;;
    *)   echo "KEY_TYPE must be ec or rsa, not $key_type" >&2; exit 2 ;;
esac

mkdir -p "$dir"
cd "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The CA.
openssl req -x509 "${newkey[@]}" -nodes -sha256 -days "$days" \
    -keyout "$work/ca.key" -out ca.pem -subj "/CN=kchannel-example-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$work/ca.key" -out ca.key

# leaf NAME SUBJECT EXTENSIONS
leaf() {
    local name=$1 subject=$2 ext=$3
    openssl req "${newkey[@]}" -nodes -sha256 -keyout "$work/$name.key" \
        -out "$work/$name.csr" -subj "$subject" 2>/dev/null
    printf '%b' "$ext" > "$work/$name.ext"
    openssl x509 -req -sha256 -days "$days" -in "$work/$name.csr" -CA ca.pem -CAkey ca.key \
        -CAcreateserial -CAserial "$work/ca.srl" -out "$name.pem" \
        -extfile "$work/$name.ext" 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in "$work/$name.key" -out "$name.key"
    cat "$name.key" "$name.pem" ca.pem > "$name.keystore.pem"
    openssl pkcs12 -export -name "$name" -in "$name.pem" -inkey "$name.key" \
        -certfile ca.pem -out "$name.p12" -passout "pass:$pass"
}

leaf server "/CN=localhost" \
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,$leaf_usage\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
leaf client "/C=US/O=Example/OU=Eng/CN=client" \
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,$leaf_usage\nextendedKeyUsage=clientAuth\n"

openssl pkcs12 -export -nokeys -in ca.pem -out truststore.p12 -passout "pass:$pass"

chmod 600 ./*.key ./*.keystore.pem ./*.p12
openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
echo "Certificates written to $dir"
