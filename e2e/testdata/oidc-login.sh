#!/bin/sh
# A kubectl exec credential plugin, as kubectl oidc-login is: it prints an
# ExecCredential with the ID token in $OIDC_ID_TOKEN.
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "$OIDC_ID_TOKEN"
