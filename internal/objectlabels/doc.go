// Package objectlabels holds the label keys and values the operator puts on the objects it owns.
//
// It imports nothing of the project, so the builders (internal/resources), the child-object
// reconcilers (internal/child), the cache selectors (internal/caching) and the controllers
// agree on one set of labels without importing each other.
package objectlabels
