package evmnodes

// OutAfter is outAfter, for the tests: how many failures in a row take a
// node out.
const OutAfter = outAfter
