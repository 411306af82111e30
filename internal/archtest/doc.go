// Package archtest holds the tests that keep the code as
// docs/architecture.md draws it: which package imports which (the
// may-import table, read from the document itself), who calls the API
// server, where flags, terminals and exit codes live, and which libraries
// the linked binary must not contain because a measured replacement took
// their place. It has no code of its own.
package archtest
