package prune

// Unpatch and Left are unpatch and left, for the tests of package
// prune_test on the real stack.
var (
	Unpatch = unpatch
	Left    = left
)
