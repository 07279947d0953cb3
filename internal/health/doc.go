// Package health serves /livez, /readyz and /healthz as kube-apiserver
// does: "ok" when every check passes, the verbose list of checks on
// ?verbose or on failure (reasons withheld from the client, logged), checks
// left out with ?exclude=, and each check at /<endpoint>/<check name>.
package health
