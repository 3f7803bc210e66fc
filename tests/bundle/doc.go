// Package bundle holds the tests of the OLM packaging: the bundle `make bundle` writes under
// bundle/, the released bundles under bundle-history/, and the File-Based Catalog under
// catalog/. They run the validators of github.com/operator-framework/api that
// `operator-sdk bundle validate --select-optional suite=operatorframework` runs, plus the
// checks the scorecard's descriptor tests make, so `make test` fails on a broken bundle.
package bundle
