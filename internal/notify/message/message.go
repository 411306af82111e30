// Package message is what a notification route tells one owner: the
// Message, the schema its template is checked against (Schema) and the data
// the template reads (Data), all three from the one Message type
// (docs/usage.md#notification-routes).
//
// It is notify's, in a leaf of its own so that config can check a route's
// template when the configuration is read: config may import only pure
// packages, and notify imports what publishes a report.
package message

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/msgtmpl"
)

// Message is what one owner is told about their claims by one route: the
// data of a route's template, and the body of a json route.
type Message struct {
	Route   string  `json:"route"`
	Owner   string  `json:"owner"`
	Cluster string  `json:"cluster"`
	Command string  `json:"command"`
	DryRun  bool    `json:"dryRun"`
	Claims  []Claim `json:"claims"`
}

// Claim is one claim of a message, as the report has it.
type Claim struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	State     string     `json:"state"`
	Action    string     `json:"action"`
	Reason    string     `json:"reason"`
	Snapshot  string     `json:"snapshot,omitempty"`
	ReapAfter *time.Time `json:"reapAfter,omitempty"`
	Capacity  int64      `json:"capacity,omitempty"`
}

// Schema is what a route's template may name: the fields of Message and of
// each of its Claims, by their Go names.
var Schema = msgtmpl.SchemaOf(Message{})

// Data is m as its route's template reads it: every field of Schema, a
// claim's ReapAfter a time or nil.
func Data(m Message) map[string]any { return msgtmpl.DataOf(m) }
