// Package scaleout holds the multi-replica tests: three real connectd
// processes on one database behind a test load balancer (scaleout_test.go),
// proving that a flow may hop between replicas, that long-polls and caches
// follow changes made on any replica, that a refresh happens once across all
// of them, that a replica killed with SIGKILL loses nothing, and that
// replicas migrating the same database at once do not conflict; and the
// fault scenario of issue 22 (faults_test.go): two replicas with a small
// pool, one provider hanging past the provider timeout while another
// provider's callers, mints and readiness checks carry on, and no refresh
// token lost. It has no non-test code; docs/scaling.md describes the
// deployment these tests model, docs/faults.md the wider fault study
// (make faults).
//
// CONNECTD_SCALEOUT_BINARY, when set, names the connectd binary to run
// instead of building one: a build of an older commit shows which of these
// tests it fails.
package scaleout
