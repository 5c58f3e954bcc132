// Package labtest proves the remote package against real OpenSSH servers:
// a lab of network-namespace hosts (scripts/lab) brought up for the test
// run and torn down after it. Root on Linux is required; elsewhere the
// tests skip and say why.
package labtest
