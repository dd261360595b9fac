#!/bin/sh
# Makes the certificates the TLS tests use, in DIR (made if missing):
#   ca.pem ca.key      the CA; other-ca.pem: a CA nobody trusts
#   NAME.pem NAME.key  for NAME in server, client, other (CN=NAME, signed by
#                      the CA), stranger (signed by the other CA), expired
#                      (valid in 2020 only), revoked (listed in crl.pem)
#   crl.pem            the CA's revocation list
# The commands are those docs/security.md shows, with a throwaway CA.
# Usage: tests/tls/make-certs.sh DIR
set -e
dir=$1
[ -n "$dir" ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$dir"
cd "$dir"
exec >make-certs.log 2>&1
for ca in ca other-ca; do
    mkdir -p "$ca.db"
    : >"$ca.db/index.txt"
    echo 1000 >"$ca.db/serial"
    echo 1000 >"$ca.db/crlnumber"
    cat >"$ca.cnf" <<CNF
[ca]
default_ca = local
[local]
dir = $ca.db
database = \$dir/index.txt
serial = \$dir/serial
crlnumber = \$dir/crlnumber
new_certs_dir = \$dir
default_md = sha256
default_days = 30
default_crl_days = 30
policy = anything
copy_extensions = none
unique_subject = no
[anything]
commonName = supplied
CNF
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=Cairn test $ca" -keyout "$ca.key" -out "$ca.pem"
done
sign() { # NAME CA [ca options]
    name=$1 ca=$2
    shift 2
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
        -keyout "$name.key" -out "$name.csr"
    openssl ca -batch -config "$ca.cnf" -cert "$ca.pem" -keyfile "$ca.key" -notext \
        -in "$name.csr" -out "$name.pem" "$@"
    chmod 600 "$name.key"
}
sign server ca
sign client ca
sign other ca
sign revoked ca
sign expired ca -startdate 20200101000000Z -enddate 20200201000000Z
sign stranger other-ca
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -revoke revoked.pem
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -gencrl -out crl.pem
