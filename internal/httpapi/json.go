package httpapi

// The API reads JSON strictly: one value, unknown fields refused, field
// names exact and given once, text that encoding/json would quietly change
// (invalid UTF-8, lone surrogates) refused, and every error a 400 (or 413)
// that names what is wrong.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// decodeJSON decodes the body strictly: unknown fields and trailing data are
// refused, and a body over the limit is 413. Text that encoding/json would
// quietly turn into U+FFFD is refused too (checkJSONText): "svc\xff" and
// "svc\xfe" would be one service.
func decodeJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return jsonError(err)
	}
	if err := checkJSONText(body); err != nil {
		return err
	}
	if raw, ok := v.(*json.RawMessage); ok && json.Valid(body) {
		// One value, nothing after it: what the decoder below would
		// copy out of the body, found in one pass (a request of many
		// batches is long).
		*raw = bytes.Trim(body, jsonSpace)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, "request body must hold one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	var httpErr *echo.HTTPError
	switch {
	case errors.As(err, &maxErr):
		return errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	case errors.As(err, &httpErr):
		// echo's body limit, from the reader of a body without a
		// Content-Length (one with it is refused before the handler): the
		// same answer either way.
		return httpErr
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "request body is empty")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return errorf(http.StatusBadRequest, "field %s: must be %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for unknown fields.
		return errorf(http.StatusBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
}

// strictUnmarshal decodes one JSON value held in memory into v, strictly:
// every object key must name a field of v's type exactly (encoding/json
// would ignore case) and be given once (it would keep the last), and
// unknown fields are refused.
func strictUnmarshal(raw []byte, v any) *Error {
	if err := checkFields(json.NewDecoder(bytes.NewReader(raw)), reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// From memory, jsonError has no reader's error to pass on.
		var apiErr *Error
		if !errors.As(jsonError(err), &apiErr) {
			apiErr = errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
		}
		return apiErr
	}
	return nil
}

// decodeStrictJSON decodes the request body into v: decodeJSON's checks,
// then strictUnmarshal's (field names exact and given once).
func decodeStrictJSON(c echo.Context, v any) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	if err := strictUnmarshal(raw, v); err != nil {
		return err
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkFields reads one JSON value from dec and refuses what encoding/json
// would let pass by guessing when it decodes the value into type t: an
// object key that names a struct field only when case is ignored, and a key
// given twice in one object. A nil t is a value of any shape, whose objects
// are checked for repeated keys only. at says where the value is, for
// messages ("" at the top).
func checkFields(dec *json.Decoder, t reflect.Type, at string) *Error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshalerType) {
		// It reads its own JSON (json.RawMessage is decoded, and checked,
		// later).
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
		}
		return nil
	}
	tok, err := dec.Token()
	if err != nil {
		return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := checkFields(dec, elem, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = jsonFields(t)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := make(map[string]bool)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
			}
			key, _ := tok.(string)
			name := key
			if at != "" {
				name = at + "." + key
			}
			if seen[key] {
				return errorf(http.StatusBadRequest, "field %s: given more than once", name)
			}
			seen[key] = true
			if fields != nil {
				ft, ok := fields[key]
				if !ok {
					return unknownField(name, key, fields)
				}
				elem = ft
			}
			if err := checkFields(dec, elem, name); err != nil {
				return err
			}
		}
	default:
		return nil // a string, number, boolean or null
	}
	if _, err := dec.Token(); err != nil { // the closing ] or }
		return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	}
	return nil
}

// jsonFields returns the names encoding/json reads a struct's fields by,
// with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type)
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" || (f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct) {
			continue // not read, or read through its own fields
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func unknownField(name, key string, fields map[string]reflect.Type) *Error {
	for _, known := range slices.Sorted(maps.Keys(fields)) {
		if strings.EqualFold(key, known) {
			return errorf(http.StatusBadRequest, "unknown field %q (field names are case-sensitive: did you mean %q?)", name, known)
		}
	}
	return errorf(http.StatusBadRequest, "unknown field %q", name)
}

// checkJSONText refuses a JSON text that encoding/json would decode with
// U+FFFD in place of what it says: invalid UTF-8, and lone UTF-16 surrogate
// escapes.
func checkJSONText(data []byte) *Error {
	if !utf8.Valid(data) {
		return errorf(http.StatusBadRequest, "request body is not valid UTF-8")
	}
	if loneSurrogate(data) {
		return errorf(http.StatusBadRequest, `request body escapes half of a UTF-16 surrogate pair alone (such as \ud800), which is no character`)
	}
	return nil
}

// loneSurrogate reports whether a JSON text escapes one half of a UTF-16
// surrogate pair without the other (\ud800 alone, or \udc00 first), which
// encoding/json decodes as U+FFFD without an error. Only escapes inside
// strings count; a text that is not JSON at all is the decoder's to refuse.
func loneSurrogate(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '"':
			inString = !inString
		case data[i] == '\\' && inString:
			r, ok := escapedRune(data[i:])
			if ok && utf16.IsSurrogate(r) {
				low, ok := escapedRune(data[i+6:])
				if !ok || utf16.DecodeRune(r, low) == unicode.ReplacementChar {
					return true
				}
				i += 6 // the low half
			}
			i++ // the escaped character, so that \" and \\ are passed
		}
	}
	return false
}

// escapedRune reads a \uXXXX escape at the start of data.
func escapedRune(data []byte) (rune, bool) {
	if len(data) < 6 || data[0] != '\\' || data[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[2:6]), 16, 16)
	return rune(n), err == nil
}
