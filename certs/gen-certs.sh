#!/usr/bin/env bash
# Makes a CA, a serving certificate for the scheduler Service and a client
# certificate for kube-scheduler's extender calls, with openssl.
#
#   certs/gen-certs.sh <out-dir> [service-name] [namespace]
#
# Serving cert: tls.crt/tls.key (mount them and pass --cert-file/--key-file).
# Client cert:  client.crt/client.key for the extender's tlsConfig.certFile/keyFile;
#               pass ca.crt as --client-ca-file to require it on /filter, /prioritize, /bind.
set -euo pipefail
out=${1:?usage: gen-certs.sh <out-dir> [service-name] [namespace]}
svc=${2:-vgpu-scheduler}
ns=${3:-kube-system}
mkdir -p "$out"
cd "$out"
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=${svc}-ca" \
  -keyout ca.key -out ca.crt
cat > server.ext <<EXT
subjectAltName=DNS:${svc},DNS:${svc}.${ns},DNS:${svc}.${ns}.svc,DNS:${svc}.${ns}.svc.cluster.local,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
EXT
openssl req -newkey rsa:2048 -nodes -subj "/CN=${svc}.${ns}.svc" -keyout tls.key -out tls.csr
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
  -extfile server.ext -out tls.crt
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-scheduler-extender-client" -keyout client.key -out client.csr
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
  -extfile client.ext -out client.crt
rm -f ./*.csr ./*.ext ca.srl
echo "written to $out: ca.crt, tls.crt, tls.key, client.crt, client.key"
