package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/ledgerq/ledgerq/internal/httpapi/apigen"
)

// Fast paths for the batch intake's JSON, whose requests carry up to
// thousands of batches. encoding/json reads each batch three times on the
// strict path (the array, the field check, the decode), a byte at a time
// through base64 payloads of hundreds of bytes. The common shape is read in
// one pass here instead; anything else (an escape, a null, a number, an
// unknown or repeated field, malformed text) is left to the strict path,
// which gives the same result for what the fast path takes and the error for
// what it does not. Both are only ever given text that decodeJSON has read
// as one JSON value and checkJSONText has passed (valid UTF-8).

// splitArray returns the elements of a JSON array, each as its own text.
// raw must be one valid JSON value, as decodeJSON leaves it; nil when it is
// not an array.
func splitArray(raw []byte) []json.RawMessage {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil
	}
	items := []json.RawMessage{}
	depth := 0 // inside the array's elements
	inString := false
	start := i + 1
	for j := i + 1; j < len(raw); j++ {
		c := raw[j]
		if inString {
			switch c {
			case '\\':
				j++ // the escaped byte: \" does not end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case '}':
			depth--
		case ']':
			if depth > 0 {
				depth--
				continue
			}
			if item := bytes.Trim(raw[start:j], jsonSpace); len(item) > 0 {
				items = append(items, item)
			}
			return items
		case ',':
			if depth == 0 {
				items = append(items, bytes.Trim(raw[start:j], jsonSpace))
				start = j + 1
			}
		}
	}
	return nil
}

// fastNewBatch reads a batch object whose every field is one of NewBatch's,
// given once, with a string value holding no escape and no control
// character; false for anything else.
func fastNewBatch(raw []byte) (apigen.NewBatch, bool) {
	var b apigen.NewBatch
	var seen [4]bool
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return b, false
	}
	for {
		key, next, ok := plainString(raw, skipSpace(raw, i+1))
		if !ok {
			return b, false
		}
		i = skipSpace(raw, next)
		if i >= len(raw) || raw[i] != ':' {
			return b, false
		}
		value, next, ok := plainString(raw, skipSpace(raw, i+1))
		if !ok {
			return b, false
		}
		var field int
		switch string(key) {
		case "id":
			b.ID = string(value)
		case "service_id":
			field = 1
			b.ServiceID = string(value)
		case "payload":
			field = 2
			b.Payload = string(value)
		case "created_at":
			field = 3
			at := string(value)
			b.CreatedAt = &at
		default:
			return b, false
		}
		if seen[field] {
			return b, false
		}
		seen[field] = true
		i = skipSpace(raw, next)
		if i >= len(raw) {
			return b, false
		}
		switch raw[i] {
		case ',':
			continue
		case '}':
			return b, skipSpace(raw, i+1) == len(raw)
		default:
			return b, false
		}
	}
}

// plainString reads the JSON string at raw[i:], if it has no escape and no
// control character, and returns its bytes and the index after it.
func plainString(raw []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return raw[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\n\r"

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (jsonSpace's bytes, compared one by one: this runs between
// every two tokens of a request).
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}
