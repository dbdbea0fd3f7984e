// Package scaleout holds the multi-replica tests (scaleout_test.go): three
// real connectd processes on one database behind a test load balancer,
// proving that a flow may hop between replicas, that long-polls and caches
// follow changes made on any replica, that a refresh happens once across all
// of them, that a replica killed with SIGKILL loses nothing, and that
// replicas migrating the same database at once do not conflict. It has no
// non-test code; docs/scaling.md describes the deployment these tests model.
package scaleout
