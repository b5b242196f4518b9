package calldata

// Selector reads a function signature, "transfer(address,uint256)", and
// returns its 4-byte selector and its canonical form (spaces dropped,
// sizeless int and uint as 256 bits), or an *Error naming "function".
func Selector(sig string) (selector [4]byte, canonical string, err error) {
	m, perr := parseFunction(sig)
	if perr != nil {
		return selector, "", perr
	}
	copy(selector[:], m.ID)
	return selector, m.Sig, nil
}
